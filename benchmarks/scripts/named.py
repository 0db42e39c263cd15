"""Questions that name their document by author, institution, organisation, product or year (benchmarks/data/named/).

The repository holds the questions and a manifest of the sources, never the documents' text. `fetch` rebuilds the
plain-text reports from pinned Debian packages (TeX Live documentation PDFs):

    python benchmarks/scripts/named.py fetch [--out DIR] [--deb-dir DIR]   # default DIR: ~/.cache/declrag/named
    python benchmarks/scripts/named.py check [--out DIR]    # spans, counts, names, title words; non-zero on a problem
    python benchmarks/scripts/named.py stats [--out DIR]
    python benchmarks/scripts/named.py golden [--out DIR]   # DIR/named.yaml: the set for a bench's --dataset

`fetch` downloads each pinned .deb with `apt-get download pkg=version` (or takes it from `--deb-dir`; the current
version, with a warning, when the pinned one is gone), extracts it, converts each PDF with pypdf exactly as the set
was written (the text of each page, pages joined by "\\n\\n", running headers and page numbers kept), checks the
text's sha256 against sources.json, and writes DIR/files/r1.txt ... and DIR/questions.jsonl. When a text differs
from the pinned one, each answer span is moved to the occurrence of its answer nearest to where it was, and a
question whose answer no longer occurs is left out; `fetch` says which. It also writes DIR/named.yaml, the set as a
golden set the benches take (`golden` writes it again).

`check` verifies that every span resolves to its exact answer in the fetched texts, that each document has at least
MIN_PER_DOC questions, that each question contains one of its document's `names` and that name occurs in the
document (compared after NFKC folding, so "Hoffmann" finds "Hoﬀmann"), that no question uses a content word of its
document's title, and that each refusal question (answer null) names something that occurs in no document.
The download, extraction, sha256 and relocation helpers are those of scenarios.py.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scenarios as base  # noqa: E402

HERE = Path(__file__).resolve()
DATA = base.REPO / "benchmarks" / "data" / "named"
SOURCES = DATA / "sources.json"
QUESTIONS = DATA / "questions.jsonl"
DEFAULT_OUT = Path("~/.cache/declrag/named")
MIN_PER_DOC = 10
NEAR = 300  # characters either side of the answer span
NAMED_BY = {"author", "institution", "organisation", "product", "year"}
STOP = {"a", "an", "and", "for", "in", "of", "on", "the", "to", "with", "by", "at", "from"}


def read_sources() -> dict[str, Any]:
    return json.loads(SOURCES.read_text(encoding="utf-8"))


def read_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def pdf_text(path: Path) -> str:
    """The PDF's text as the set was written from it: each page's pypdf text, pages joined by a blank line."""
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    return "\n\n".join(page.extract_text() for page in PdfReader(str(path)).pages)


def ensure_pypdf() -> None:
    """pypdf comes with declrag's environment: rerun under the repository's .venv when it is not importable."""
    base.HERE = HERE  # so that scenarios' re-exec runs this script, not scenarios.py
    base.ensure_declrag()
    try:
        import pypdf  # noqa: F401
    except ImportError:
        base.die("cannot import pypdf: run with the project's environment (.venv/bin/python)")


def fold(s: str) -> str:
    return unicodedata.normalize("NFKC", s).casefold()


def has_name(text: str, name: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(fold(name)) + r"(?!\w)", fold(text)) is not None


def title_words(title: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", fold(title)) if len(w) > 1 and re.search("[a-z]", w)} - STOP


def uses_title_word(question: str, words: set[str]) -> list[str]:
    """The question's words that are one of the title's content words (plural, or a longer word built on it)."""
    hits = []
    for q in re.findall(r"[a-z0-9]+", fold(question)):
        for t in words:
            if q == t or q.rstrip("s") == t.rstrip("s") or (len(t) >= 5 and q.startswith(t.rstrip("s"))):
                hits.append(q)
    return hits


# ------------------------------------------------------------------------------------------------ fetch
def build_texts(docs: list[dict[str, Any]], deb_dir: Path | None) -> tuple[dict[str, str], dict[str, Any]]:
    """Each document's text, and per document what was used (version, whether the sha256 matched)."""
    texts: dict[str, str] = {}
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="declrag-named-") as tmp:
        work = Path(tmp)
        roots: dict[tuple[str, str], tuple[Path, str]] = {}
        for d in docs:
            key = (d["package"], d["version"])
            if key not in roots:
                deb, pinned = base.download(d["package"], d["version"], work, deb_dir)
                root = work / "x" / deb.stem
                base.extract(deb, root)
                roots[key] = (root, base.deb_version(deb))
                print(f"{deb.name}: extracted{'' if pinned else ' (NOT the pinned version)'}")
            root, version = roots[key]
            path = root / d["path"]
            if not path.is_file():
                base.die(f"{d['package']} {version} has no {d['path']}")
            text = pdf_text(path)
            texts[d["id"]] = text
            ok = base.sha256(text) == d["sha256"]
            report[d["id"]] = {"package": d["package"], "pinned": d["version"], "used": version, "sha256_ok": ok,
                               "chars": len(text)}
            if not ok:
                base.warn(f"{d['id']}: text differs from the pinned one (sha256 {base.sha256(text)[:12]}, "
                          f"{len(text)} characters; pinned {d['sha256'][:12]}, {d['chars']}): spans are relocated")
    return texts, report


def fetch(out: Path, deb_dir: Path | None) -> None:
    ensure_pypdf()
    t0 = time.time()
    docs = read_sources()["documents"]
    texts, report = build_texts(docs, deb_dir)
    chars = {d["id"]: d["chars"] for d in docs}
    rows, moved, dropped = [], [], []
    for q in read_questions():
        spans = [base.relocate(texts[s["doc"]], chars[s["doc"]], s) for s in q["spans"]]
        if any(s is None for s in spans):
            dropped.append(q["id"])
            continue
        if any(new is not old for new, old in zip(spans, q["spans"])):
            moved.append(q["id"])
        rows.append({**q, "spans": spans})
    for what, ids in (("moved to the nearest occurrence of their answer", moved), ("left out (answer gone)", dropped)):
        if ids:
            base.warn(f"{len(ids)} question(s) {what}: {', '.join(ids)}")
    out = out.expanduser()
    part = out.with_name(out.name + ".partial")
    shutil.rmtree(part, ignore_errors=True)
    (part / "files").mkdir(parents=True)
    for d in docs:
        (part / "files" / d["file"]).write_text(texts[d["id"]], encoding="utf-8")
    with (part / "questions.jsonl").open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    summary = {"documents": report, "questions": len(rows), "moved": moved, "dropped": dropped,
               "seconds": round(time.time() - t0, 1)}
    (part / "fetch.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    part.replace(out)
    bad = [k for k, v in report.items() if not v["sha256_ok"]]
    print(f"wrote {out}: {len(docs)} documents, {len(rows)} questions ({summary['seconds']} s)"
          + (f"; texts differing from the pinned ones: {', '.join(bad)}" if bad else ""))
    print(f"wrote {golden(out)} (the set for a bench's --dataset)")


# ------------------------------------------------------------------------------------------------ check
def check_question(q: dict[str, Any], doc: dict[str, Any] | None, text: str | None) -> list[str]:
    """Problems with one answered question: its span, its name, its title words."""
    where, problems = f"{q.get('id')}", []
    spans = q.get("spans") or []
    if doc is None or len(spans) != 1 or spans[0].get("doc") != doc["id"] or q.get("file") != doc["file"]:
        return [f"{where}: expected one span in a known document matching its file"]
    s = spans[0]
    if s.get("answer") != q["answer"] or s["end"] - s["start"] != len(q["answer"]):
        problems.append(f"{where}: span {s} does not match the answer {q['answer']!r}")
    if not 1 <= len(q["answer"].split()) <= 12:
        problems.append(f"{where}: answer of {len(q['answer'].split())} words")
    if text is not None and text[s["start"]:s["end"]] != q["answer"]:
        problems.append(f"{where}: [{s['start']}, {s['end']}) is {text[s['start']:s['end']]!r}, not {q['answer']!r}")
    names = [n for n in doc["names"] if has_name(q["question"], n)]
    if not names:
        problems.append(f"{where}: names its document by none of {doc['names']}")
    for n in names:
        if text is not None and not has_name(text, n):
            problems.append(f"{where}: the name {n!r} does not occur in {doc['file']}")
    hits = uses_title_word(q["question"], title_words(doc["title"]))
    if hits:
        problems.append(f"{where}: uses title word(s) {hits} of {doc['title']!r}")
    return problems


def check(out: Path) -> int:
    src = read_sources()
    docs = {d["id"]: d for d in src["documents"]}
    qs = read_questions()
    out = out.expanduser()
    problems: list[str] = []
    texts: dict[str, str | None] = {}
    for d in docs.values():
        p = out / "files" / d["file"]
        t = texts[d["id"]] = p.read_text(encoding="utf-8") if p.is_file() else None
        if t is None:
            problems.append(f"{p}: missing (run: python {Path(sys.argv[0]).name} fetch --out {out})")
        elif base.sha256(t) != d["sha256"]:
            base.warn(f"{d['id']}: fetched text differs from the pinned one (spans were relocated by fetch)")
    if (out / "questions.jsonl").is_file():
        fetched = {q["id"]: q for q in read_questions(out / "questions.jsonl")}
        if len(fetched) != len(qs):
            problems.append(f"{out}: {len(fetched)} questions fetched, the repository has {len(qs)}")
        qs = [fetched.get(q["id"], q) for q in qs]  # the fetched spans are the ones that must resolve
    seen: set[str] = set()
    for q in qs:
        if q.get("id") in seen:
            problems.append(f"{q.get('id')}: duplicate id")
        seen.add(str(q.get("id")))
        if q.get("named_by") not in NAMED_BY or not str(q.get("question", "")).strip():
            problems.append(f"{q.get('id')}: bad named_by {q.get('named_by')!r} or no question")
        if q.get("answer") is None:
            problems += check_refusal(q, src, texts)
        else:
            doc = docs.get((q.get("spans") or [{}])[0].get("doc"))
            problems += check_question(q, doc, texts.get(doc["id"]) if doc else None)
    per_doc = Counter(q["spans"][0]["doc"] for q in qs if q.get("spans"))
    for d in docs:
        if per_doc[d] < MIN_PER_DOC:
            problems.append(f"{d}: {per_doc[d]} questions (fewer than {MIN_PER_DOC})")
    print_counts(src, qs, texts)
    for p in problems:
        print(f"PROBLEM: {p}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return len(problems)


def check_refusal(q: dict[str, Any], src: dict[str, Any], texts: dict[str, str | None]) -> list[str]:
    where = q.get("id")
    problems = [] if not q.get("spans") and q.get("file") is None else [f"{where}: a null answer takes no span/file"]
    absent = [n for n in src.get("absent_names", []) if has_name(q["question"], n)]
    if not absent:
        problems.append(f"{where}: names none of the absent names {src.get('absent_names')}")
    for n in absent:
        problems += [f"{where}: {n!r} does occur in {k}" for k, t in texts.items() if t and has_name(t, n)]
    return problems


def print_counts(src: dict[str, Any], qs: list[dict[str, Any]], texts: dict[str, str | None]) -> None:
    """Per document: characters, questions, named_by counts, and how many name it far from the answer."""
    print(f"{'doc':4} {'package':30} {'version':16} {'chars':>7} {'qs':>3} {'far':>4}  named_by")
    for d in src["documents"]:
        mine = [q for q in qs if q.get("spans") and q["spans"][0]["doc"] == d["id"]]
        t = texts.get(d["id"])
        far = "?" if t is None else sum(not any(has_name(t[max(0, q["spans"][0]["start"] - NEAR):
                                                          q["spans"][0]["end"] + NEAR], n)
                                                for n in d["names"] if has_name(q["question"], n)) for q in mine)
        by = dict(Counter(q["named_by"] for q in mine))
        print(f"{d['id']:4} {d['package']:30} {d['version']:16} {d['chars']:>7} {len(mine):>3} {far:>4}  {by}")
    words = [len(q["question"].split()) for q in qs]
    print(f"questions: {len(qs)} ({sum(q.get('answer') is None for q in qs)} naming absent documents); "
          f"named_by {dict(Counter(q['named_by'] for q in qs))}; words per question {min(words)}-{max(words)}, "
          f"mean {statistics.mean(words):.1f}; far = the name used is not within {NEAR} characters of the answer")


def stats(out: Path) -> None:
    src = read_sources()
    out = out.expanduser()
    texts = {d["id"]: (out / "files" / d["file"]).read_text(encoding="utf-8")
             if (out / "files" / d["file"]).is_file() else None for d in src["documents"]}
    qs = read_questions()
    print_counts(src, qs, texts)
    answers = [len(q["answer"].split()) for q in qs if q.get("answer") is not None]
    numeric = sum(bool(re.fullmatch(r"[-−]?[0-9.]+[a-z]*", q.get("answer") or "")) for q in qs)
    print(f"answer words: {min(answers)}-{max(answers)}, mean {statistics.mean(answers):.1f}; numeric: {numeric}")


def golden(out: Path) -> Path:
    """The fetched set as a golden set the benches take (``--dataset DIR/named.yaml``): DIR/corpus.jsonl (each
    report a document, id as in the spans) and DIR/golden.jsonl (the questions with spans; refusals left out)."""
    out = out.expanduser()
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as c:
        for f in sorted((out / "files").glob("*.txt")):
            c.write(json.dumps({"_id": f.stem, "text": f.read_text(encoding="utf-8")}, ensure_ascii=False) + "\n")
    with open(out / "golden.jsonl", "w", encoding="utf-8") as g:
        for q in read_questions(out / "questions.jsonl"):  # as fetched: spans moved where a text changed
            if q.get("spans"):
                g.write(json.dumps({k: q[k] for k in ("id", "question", "answer", "spans")}, ensure_ascii=False) + "\n")
    (out / "named.yaml").write_text("name: named\nformat: jsonl\npath: golden.jsonl\ncorpus: corpus.jsonl\n"
                                    "description: questions that name their document (benchmarks/scripts/named.py)\n")
    return out / "named.yaml"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download the pinned packages and write DIR/files and DIR/questions.jsonl")
    f.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the folder to write (default {DEFAULT_OUT})")
    f.add_argument("--deb-dir", type=Path, help="a folder holding the .deb files already (no download)")
    for name, text in (("check", "check spans, counts, names and title words"), ("stats", "counts and lengths"),
                       ("golden", "write DIR/named.yaml, a golden set of the fetched files for --dataset")):
        sub.add_parser(name, help=text).add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = p.parse_args(argv)
    if a.cmd == "fetch":
        fetch(a.out, a.deb_dir)
    elif a.cmd == "check":
        sys.exit(1 if check(a.out) else 0)
    elif a.cmd == "golden":
        print(f"wrote {golden(a.out)}")
    else:
        stats(a.out)


if __name__ == "__main__":
    main()
