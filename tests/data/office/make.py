"""Writes the small office files the loader tests read (committed beside this script; run it again to remake them):
Word, OpenDocument text and EPUB by LibreOffice from one HTML page, a deck by python-pptx (and LibreOffice's .odp of
it), a workbook by openpyxl (and LibreOffice's .ods of it), a CSV, an e-mail with attachments, a zip.

    python tests/data/office/make.py      (needs LibreOffice: apt-get install libreoffice-writer-nogui
                                           libreoffice-calc-nogui libreoffice-impress-nogui; and msoffcrypto-tool)

Every file holds the same fact, so that one question finds it in each: the marketing budget for Q3 is 120,000,
owned by Tomas Berg; the Sales figures beside it say otherwise (370,000), so that the right table must be found.
"""

from __future__ import annotations

import email.policy
import io
import shutil
import subprocess
import tempfile
import zipfile
from email.message import EmailMessage
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = [("Q1", 80000, "Ana Ruiz"), ("Q2", 95000, "Ana Ruiz"), ("Q3", 120000, "Tomas Berg"), ("Q4", 60000, "Tomas Berg")]
SALES = [("Q1", 310000), ("Q2", 280000), ("Q3", 370000), ("Q4", 400000)]
HTML = """<html><head><title>Marketing plan 2026</title></head><body>
<h1>Marketing plan 2026</h1>
<p>This plan sets the marketing budget for each quarter of 2026 and names the owner of each campaign.</p>
<h2>Quarterly budget</h2>
<table><tr><th>Quarter</th><th>Budget</th><th>Owner</th></tr>
{rows}</table>
<h2>Channels</h2>
<p>Most of the third quarter goes to the autumn trade fair in Lyon.</p>
</body></html>"""


def soffice(src: Path, to: str, out: Path, infilter: str | None = None) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["soffice", "--headless", f"-env:UserInstallation=file://{tmp}/profile"]
        cmd += [f"--infilter={infilter}"] if infilter else []
        subprocess.run([*cmd, "--convert-to", to, str(src), "--outdir", tmp], check=True, capture_output=True)
        made = next(p for p in Path(tmp).iterdir() if p.is_file())
        shutil.move(made, out)
    return out


def word_files() -> None:
    rows = "".join(f"<tr><td>{q}</td><td>{b:,}</td><td>{o}</td></tr>" for q, b, o in ROWS)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "plan.html"
        page.write_text(HTML.format(rows=rows))
        for suffix, to in (("docx", 'docx:MS Word 2007 XML'), ("odt", "odt"), ("epub", "epub")):
            soffice(page, to, HERE / f"plan.{suffix}", "HTML (StarWriter)")


def deck() -> None:
    import pptx
    from pptx.util import Inches

    prs = pptx.Presentation()
    s1 = prs.slides.add_slide(prs.slide_layouts[1])
    s1.shapes.title.text = "Marketing plan 2026"
    s1.placeholders[1].text = "Budgets per quarter\nThe autumn trade fair in Lyon"
    s1.notes_slide.notes_text_frame.text = "Ask Tomas about the fair's booth size."
    s2 = prs.slides.add_slide(prs.slide_layouts[5])
    s2.shapes.title.text = "Draft figures (withdrawn)"
    s2.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1)).text_frame.text = "Q3 budget 999,999"
    s2._element.set("show", "0")  # hidden
    s3 = prs.slides.add_slide(prs.slide_layouts[5])
    s3.shapes.title.text = "Marketing budget"
    table = s3.shapes.add_table(len(ROWS) + 1, 3, Inches(1), Inches(2), Inches(7), Inches(3)).table
    for j, head in enumerate(("Quarter", "Budget", "Owner")):
        table.cell(0, j).text = head
    for i, (q, b, o) in enumerate(ROWS, 1):
        for j, v in enumerate((q, f"{b:,}", o)):
            table.cell(i, j).text = v
    prs.core_properties.title = "Marketing plan 2026"
    prs.save(HERE / "plan.pptx")
    soffice(HERE / "plan.pptx", "odp", HERE / "plan.odp")


def workbook() -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sales"
    ws.append(["Quarter", "Revenue"])
    for row in SALES:
        ws.append(row)
    ws = wb.create_sheet("Marketing")
    ws.append(["Budget 2026 (EUR)"])  # a title row above the table, as people write them
    ws.append([])
    ws.append(["Quarter", "Budget", "Owner"])
    for row in ROWS:
        ws.append(row)
    hidden = wb.create_sheet("Old plan")
    hidden.append(["Quarter", "Budget"])
    hidden.append(["Q3", 999999])
    hidden.sheet_state = "hidden"
    wb.properties.title = "Budgets 2026"
    wb.save(HERE / "budget.xlsx")
    soffice(HERE / "budget.xlsx", "ods", HERE / "budget.ods")


def csv_file() -> None:
    (HERE / "marketing.csv").write_text("Quarter,Budget,Owner\n" + "".join(f"{q},{b},{o}\n" for q, b, o in ROWS))


def mail() -> None:
    msg = EmailMessage(policy=email.policy.SMTP)
    msg["From"] = "Ana Ruiz <ana@example.com>"
    msg["To"] = "team@example.com"
    msg["Date"] = "Tue, 03 Feb 2026 09:15:00 +0100"
    msg["Subject"] = "Marketing budget for 2026"
    msg.set_content("Hi all,\n\nThe budget for the third quarter is settled: Tomas Berg owns it.\n"
                    "The figures are in the attached sheet.\n\nAna\n")
    msg.add_attachment((HERE / "marketing.csv").read_bytes(), maintype="text", subtype="csv",
                       filename="marketing.csv")
    msg.add_attachment(b"\x89PNG\r\n\x1a\n" + bytes(64), maintype="image", subtype="png", filename="logo.png")
    (HERE / "budget-mail.eml").write_bytes(msg.as_bytes())


def protected() -> None:
    """plan.docx saved with a password, as Word does (ECMA-376 agile encryption), by msoffcrypto-tool (MIT; not a
    dependency of declrag: pip install msoffcrypto-tool where this script runs)."""
    from msoffcrypto.format.ooxml import OOXMLFile

    with (HERE / "plan.docx").open("rb") as src, (HERE / "protected.docx").open("wb") as out:
        OOXMLFile(src).encrypt("secret", out)


def archive() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(HERE / "plan.docx", "plans/plan.docx")
        z.write(HERE / "marketing.csv", "tables/marketing.csv")
        z.writestr("tables/chart.png", b"\x89PNG\r\n\x1a\n" + bytes(64))
        z.writestr("__MACOSX/._plan.docx", b"\x00")
    (HERE / "bundle.zip").write_bytes(buf.getvalue())


if __name__ == "__main__":
    word_files()
    deck()
    workbook()
    csv_file()
    mail()
    archive()
    protected()
    for p in sorted(HERE.iterdir()):
        if p.suffix != ".py":
            print(f"{p.name}: {p.stat().st_size:,} bytes")
