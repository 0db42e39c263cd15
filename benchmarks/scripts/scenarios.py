"""Scenario questions over long public documents that are not Wikipedia (benchmarks/data/scenarios/).

The repository holds the questions and a manifest of the sources, never the documents' text. `fetch` rebuilds the
documents from pinned Debian packages and writes a golden-set folder that `declrag` loads (`--dataset DIR`):

    python benchmarks/scripts/scenarios.py fetch [--out DIR]     # default DIR: ~/.cache/declrag/scenarios
    python benchmarks/scripts/scenarios.py check [--out DIR]     # every span resolves to its exact answer
    python benchmarks/scripts/scenarios.py stats [--out DIR] [--compare nq-long,squad-v1.1] [--json]

`fetch` downloads each pinned .deb with `apt-get download pkg=version` (or takes it from `--deb-dir`; the current
version, with a warning, when the pinned one is gone), extracts it, converts each chosen file to text exactly as
`declrag index` reads it (HTML through declrag's own loader; other files as UTF-8), and checks the text's sha256
against sources.json. When a text differs from the pinned one, each answer span is moved to the occurrence of its
answer nearest to where it was, and a question whose answer no longer occurs is left out; `fetch` says which.
`fetch --update-sources` (for whoever changes the set) writes the converted texts' sha256, length and title into
sources.json instead of checking them.

`stats` prints, for this set and for the named sets to compare with, the mean question length in words and the
word overlap: the share of a question's content words that occur within 300 characters either side of its answer
span (the span included). Three variants: words as the BM25 leg tokenizes them less Weaviate's English stopwords
(`declrag.stores.bm25`); the same less a full English stopword list (scikit-learn's), which does not count "I",
"my", "we" as content; and the measure of `declrag bench nolabels` (200 characters, its content words less the
asking words), the one the dataset READMEs quote. Sets without spans are scored on their first gold span, as there.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
DATA = REPO / "benchmarks" / "data" / "scenarios"
SOURCES = DATA / "sources.json"
QUESTIONS = DATA / "questions.jsonl"
DEFAULT_OUT = Path("~/.cache/declrag/scenarios")
SPLIT = "test"
WINDOW = 300  # characters either side of the answer span
MIN_PER_DOC = 10


def warn(msg: str) -> None:
    print(f"scenarios: warning: {msg}", file=sys.stderr)


def die(msg: str) -> None:
    sys.exit(f"scenarios: {msg}")


def ensure_declrag() -> None:
    """declrag must be importable (its HTML loader makes the text); else rerun under the repository's .venv."""
    try:
        import declrag  # noqa: F401
    except ImportError:
        venv = REPO / ".venv" / "bin" / "python"
        if venv.exists() and not os.environ.get("DECLRAG_SCENARIOS_REEXEC"):
            os.environ["DECLRAG_SCENARIOS_REEXEC"] = "1"
            os.execv(str(venv), [str(venv), str(HERE), *sys.argv[1:]])
        die("cannot import declrag: run with the project's environment (bash scripts/setup.sh, then .venv/bin/python)")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_sources() -> dict[str, Any]:
    return json.loads(SOURCES.read_text(encoding="utf-8"))


def read_questions() -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(QUESTIONS.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                die(f"{QUESTIONS}:{n}: not valid JSON: {e}")
    return rows


# ------------------------------------------------------------------------------------------------ fetch
def _deb_name(pkg: str, version: str) -> str:
    return f"{pkg}_{version.split(':', 1)[-1]}_"  # file names drop the epoch


def download(pkg: str, version: str, work: Path, deb_dir: Path | None) -> tuple[Path, bool]:
    """The package's .deb in ``work`` (from ``deb_dir`` when it has it), and whether it is the pinned version."""
    if deb_dir is not None:
        found = sorted(deb_dir.glob(_deb_name(pkg, version) + "*.deb"))
        if found:
            return found[0], True
        warn(f"{deb_dir} has no {_deb_name(pkg, version)}*.deb; trying apt-get")
    if shutil.which("apt-get") is None:
        die(f"no apt-get here: download {pkg} {version} (e.g. from https://snapshot.debian.org/) and pass --deb-dir")
    pinned = True
    r = subprocess.run(["apt-get", "download", f"{pkg}={version}"], cwd=work, capture_output=True, text=True)
    if r.returncode != 0:
        reason = (r.stderr.strip().splitlines() or ["apt-get failed"])[-1]
        warn(f"{pkg}={version} is not available ({reason}); using the current version: answer spans are moved "
             "to the nearest occurrence of their answer where the text changed")
        pinned = False
        r = subprocess.run(["apt-get", "download", pkg], cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            die(f"apt-get download {pkg} failed: {r.stderr.strip()[-300:]}\n(no package lists? run "
                "`sudo apt-get update`; elsewhere, put the .deb files in a folder and pass --deb-dir)")
    debs = sorted(work.glob(f"{pkg}_*.deb"), key=lambda p: p.stat().st_mtime)
    if not debs:
        die(f"apt-get download {pkg} left no .deb in {work}")
    return debs[-1], pinned and debs[-1].name.startswith(_deb_name(pkg, version))


def deb_version(deb: Path) -> str:
    if shutil.which("dpkg-deb"):
        r = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    return deb.name.split("_")[1].replace("%3a", ":")


def extract(deb: Path, dest: Path) -> None:
    """``dpkg-deb -x``; without dpkg, the ar archive's data.tar read by Python (gz, xz or uncompressed)."""
    dest.mkdir(parents=True, exist_ok=True)
    if shutil.which("dpkg-deb"):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
        return
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        die(f"{deb}: not a Debian package")
    at = 8
    while at + 60 <= len(raw):
        name, size = raw[at:at + 16].decode().strip().rstrip("/"), int(raw[at + 48:at + 58].decode().strip())
        body = raw[at + 60:at + 60 + size]
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                die(f"{deb}: zstd-compressed data: install dpkg (dpkg-deb) to extract it")
            with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                if hasattr(tarfile, "data_filter"):  # Python 3.12+, and 3.11.4+
                    tar.extractall(dest, filter="data")
                else:
                    tar.extractall(dest)  # noqa: S202 (a Debian package's own files)
            return
        at += 60 + size + (size & 1)
    die(f"{deb}: no data.tar member")


def convert(path: Path) -> tuple[str, str]:
    """A file's text and title as `declrag index` reads them (HTML: declrag's loader; else UTF-8)."""
    if path.suffix.lower() in (".html", ".htm"):
        from declrag.ingest.loaders import load_file

        doc = load_file(path)[0]
        return doc.text, doc.title
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    text = data.decode("utf-8")
    return text, next((line.strip() for line in text.splitlines() if line.strip()), path.name)


def relocate(text: str, old_len: int, span: dict[str, Any]) -> dict[str, Any] | None:
    """The span where its answer now is: unchanged if still there, else the occurrence nearest to its old place
    (scaled to the new length); None when the answer occurs nowhere."""
    a, s = span["answer"], span["start"]
    if text[s:span["end"]] == a:
        return span
    hits = [m.start() for m in re.finditer(re.escape(a), text)]
    if not hits:
        return None
    want = s * len(text) / max(old_len, 1)
    at = min(hits, key=lambda h: abs(h - want))
    return {**span, "start": at, "end": at + len(a)}


def fetch(out: Path, deb_dir: Path | None, update_sources: bool) -> None:
    ensure_declrag()
    import yaml

    src = read_sources()
    docs = src["documents"]
    t0 = time.time()
    texts: dict[str, str] = {}
    report: dict[str, Any] = {"documents": {}}
    with tempfile.TemporaryDirectory(prefix="declrag-scenarios-") as tmp:
        work = Path(tmp)
        debs: dict[tuple[str, str], tuple[Path, bool, str]] = {}
        for d in docs:
            key = (d["package"], d["version"])
            if key not in debs:
                deb, pinned = download(d["package"], d["version"], work, deb_dir)
                root = work / "x" / deb.stem
                extract(deb, root)
                debs[key] = (root, pinned, deb_version(deb))
                print(f"{deb.name}: extracted{'' if pinned else ' (NOT the pinned version)'}")
                if update_sources:
                    d_sha = hashlib.sha256(deb.read_bytes()).hexdigest()
                    for e in docs:
                        if (e["package"], e["version"]) == key:
                            e["version"], e["deb_sha256"] = debs[key][2], d_sha
            root, pinned, version = debs[key]
            path = root / d["path"].lstrip("/")
            if not path.is_file():
                die(f"{d['package']} {version} has no {d['path']}")
            text, title = convert(path)
            texts[d["id"]] = text
            ok = sha256(text) == d.get("sha256")
            report["documents"][d["id"]] = {"package": d["package"], "pinned": d["version"], "used": version,
                                            "sha256_ok": ok, "chars": len(text)}
            if update_sources:
                d.update(title=d.get("title") or title, sha256=sha256(text), chars=len(text))
            elif not ok:
                warn(f"{d['id']}: text differs from the pinned one (sha256 {sha256(text)[:12]}, {len(text)} "
                     f"characters; pinned {str(d.get('sha256'))[:12]}, {d.get('chars')}): spans are relocated")
    if update_sources:
        SOURCES.write_text(json.dumps(src, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {SOURCES}")
    by_id = {d["id"]: d for d in docs}
    rows, moved, dropped = [], [], []
    for q in read_questions():
        spans = []
        for sp in q["spans"]:
            old = by_id[sp["doc"]].get("chars") or len(texts[sp["doc"]])
            new = relocate(texts[sp["doc"]], old, sp)
            if new is None:
                break
            if new is not sp:
                moved.append(q["id"])
            spans.append(new)
        else:
            rows.append({**q, "spans": spans})
            continue
        dropped.append(q["id"])
    for name, ids in (("moved to the nearest occurrence of their answer", moved), ("left out (answer gone)", dropped)):
        if ids:
            warn(f"{len(ids)} question(s) {name}: {', '.join(ids)}")
    report.update(questions=len(rows), moved=moved, dropped=dropped, seconds=round(time.time() - t0, 1))

    out = out.expanduser()
    part = out.with_name(out.name + ".partial")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    with (part / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in docs:  # the title stays in metadata: the jsonl reader would put a top-level title before the text
            f.write(json.dumps({"_id": d["id"], "title": "", "text": texts[d["id"]], "metadata": {
                "title": d["title"], "source": f"{d['package']}:{d['path']}", "package": d["package"],
                "version": report["documents"][d["id"]]["used"], "path": d["path"], "license": d["license"]}},
                ensure_ascii=False) + "\n")
    with (part / f"{SPLIT}.jsonl").open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    decl = {"name": "scenarios", "format": "jsonl", "path": ".", "corpus": "corpus.jsonl",
            "splits": {SPLIT: f"{SPLIT}.jsonl"},
            "description": src.get("description", ""), "license": src.get("license", "")}
    (part / "dataset.yaml").write_text(yaml.safe_dump(decl, sort_keys=False, allow_unicode=True), encoding="utf-8")
    (part / "fetch.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    part.replace(out)
    bad = [k for k, v in report["documents"].items() if not v["sha256_ok"]]
    print(f"wrote {out}: {len(docs)} documents, {len(rows)} questions ({report['seconds']} s)"
          + (f"; texts differing from the pinned ones: {', '.join(bad)}" if bad and not update_sources else ""))


# ------------------------------------------------------------------------------------------------ check
def check(out: Path) -> int:
    """The repository's files agree with each other, and the fetched folder loads with every span resolving to its
    exact answer string. Prints the counts; returns the number of problems."""
    src = read_sources()
    ids = [d["id"] for d in src["documents"]]
    problems: list[str] = []
    qs = read_questions()
    seen: set[str] = set()
    for q in qs:
        where = f"questions.jsonl {q.get('id')!r}"
        if q.get("id") in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(q.get("id"))
        spans, answers = q.get("spans") or [], q.get("answers") or []
        if not isinstance(q.get("question"), str) or not q["question"].strip():
            problems.append(f"{where}: no question")
        if len(answers) != 1 or len(spans) != 1:
            problems.append(f"{where}: expected one answer and one span")
        for s in spans:
            if s.get("doc") not in ids:
                problems.append(f"{where}: unknown document {s.get('doc')!r}")
            if s.get("answer") not in answers or s["end"] - s["start"] != len(s.get("answer", "")):
                problems.append(f"{where}: span {s} does not match the answers {answers}")
    per_doc = Counter(q["spans"][0]["doc"] for q in qs if q.get("spans"))
    for d in ids:
        if per_doc[d] < MIN_PER_DOC:
            problems.append(f"{d}: {per_doc[d]} questions (fewer than {MIN_PER_DOC})")

    out = out.expanduser()
    if not (out / "dataset.yaml").is_file():
        problems.append(f"{out}: no fetched set (run: python {Path(sys.argv[0]).name} fetch --out {out})")
        return _report(problems, qs, per_doc, src, None)
    ensure_declrag()
    from declrag.golden import load_golden

    g = load_golden(str(out))
    print(g.name, len(g.documents), {k: len(v) for k, v in g.splits.items()})
    texts = {d.id: d.text for d in g.documents}
    for d in src["documents"]:
        t = texts.get(d["id"])
        if t is None:
            problems.append(f"{out}: document {d['id']} missing")
        elif sha256(t) != d["sha256"]:
            warn(f"{d['id']}: fetched text differs from the pinned one (spans were relocated by fetch)")
    resolved = 0
    examples = g.splits.get(SPLIT, [])
    for e in examples:
        for s in e.spans:
            got = texts.get(s.doc, "")[s.start:s.end]
            if got != s.answer or got not in e.answers:
                problems.append(f"{out}: {e.id}: [{s.start}, {s.end}) of {s.doc} is {got!r}, not {s.answer!r}")
            else:
                resolved += 1
    if len(examples) != len(qs):
        problems.append(f"{out}: {len(examples)} questions loaded, the repository has {len(qs)}")
    return _report(problems, qs, per_doc, src, (len(examples), resolved))


def _report(problems: list[str], qs: list[dict[str, Any]], per_doc: Counter, src: dict[str, Any],
            loaded: tuple[int, int] | None) -> int:
    words = [len(q["question"].split()) for q in qs]
    print(f"{'document':24} {'package':22} {'version':18} {'chars':>8} {'questions':>9}")
    for d in src["documents"]:
        print(f"{d['id']:24} {d['package']:22} {d['version']:18} {d['chars']:>8} {per_doc[d['id']]:>9}")
    print(f"questions: {len(qs)}; words per question {min(words)}-{max(words)}, mean {statistics.mean(words):.1f}")
    if loaded:
        print(f"loaded: {loaded[0]} questions, {loaded[1]} spans resolve to their exact answer strings")
    for p in problems:
        print(f"PROBLEM: {p}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return len(problems)


# ------------------------------------------------------------------------------------------------ stats
ASKING = {"what", "when", "where", "who", "whom", "whose", "which", "why", "how", "did", "does", "do", "much", "many"}


def overlap_stats(examples: list[Any], texts: dict[str, str]) -> dict[str, Any]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from declrag.text.keywords import STOPWORDS_EN, tokenize
    from declrag.synth._generate import content_words

    full_stop = STOPWORDS_EN | ENGLISH_STOP_WORDS
    a, b, c, words = [], [], [], []
    for e in examples:
        spans = [s for s in e.gold_spans() if s.doc in texts]
        if not spans:
            continue
        s, text = spans[0], texts[spans[0].doc]
        near = set(tokenize(text[max(0, s.start - WINDOW):s.end + WINDOW]))
        toks = set(tokenize(e.question))
        for share, stop in ((a, STOPWORDS_EN), (b, full_stop)):
            qw = {w for w in toks if w not in stop}
            if qw:
                share.append(sum(w in near for w in qw) / len(qw))
        low = text[max(0, s.start - 200):s.end + 200].lower()  # declrag bench nolabels' measure
        qw = {w.lower() for w in content_words(e.question)} - ASKING
        if qw:
            c.append(sum(w in low for w in qw) / len(qw))
        words.append(len(e.question.split()))
    def mean(xs: list[float]) -> float | None:
        return round(float(statistics.mean(xs)), 3) if xs else None

    return {"questions": len(words), "mean_words": round(statistics.mean(words), 1) if words else None,
            "overlap_300_weaviate_stopwords": mean(a), "overlap_300_english_stopwords": mean(b),
            "overlap_200_nolabels": mean(c)}


def stats(out: Path, compare: list[str], as_json: bool) -> None:
    ensure_declrag()
    from declrag.golden import load_golden

    rows: dict[str, Any] = {}
    for name, spec in [("scenarios", str(out.expanduser())), *((n, n) for n in compare)]:
        t0 = time.time()
        try:
            g = load_golden(spec)
        except Exception as e:  # a comparison set that is not here is skipped, not fatal
            if name == "scenarios":
                die(f"cannot load {spec}: {e} (run fetch first)")
            warn(f"{name}: skipped ({str(e).splitlines()[0][:160]})")
            continue
        texts = {d.id: d.text for d in g.documents}
        examples = [e for split in g.splits.values() for e in split]
        rows[name] = {**overlap_stats(examples, texts), "documents": len(texts),
                      "median_doc_chars": int(statistics.median(len(t) for t in texts.values())),
                      "seconds": round(time.time() - t0, 1)}
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(f"| set | documents | median chars | questions | mean words | overlap@{WINDOW} (Weaviate stopwords) | "
          f"overlap@{WINDOW} (English stopwords) | overlap@200 (nolabels) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['documents']} | {r['median_doc_chars']:,} | {r['questions']} | {r['mean_words']} | "
              f"{r['overlap_300_weaviate_stopwords']:.0%} | {r['overlap_300_english_stopwords']:.0%} | "
              f"{r['overlap_200_nolabels']:.0%} |")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download the pinned packages and write the golden-set folder")
    f.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the folder to write (default {DEFAULT_OUT})")
    f.add_argument("--deb-dir", type=Path, help="a folder holding the .deb files already (no download)")
    f.add_argument("--update-sources", action="store_true",
                   help="write the converted texts' sha256, length and title into sources.json (maintainers)")
    c = sub.add_parser("check", help="check the repository's files and that every span resolves in the fetched set")
    c.add_argument("--out", type=Path, default=DEFAULT_OUT)
    s = sub.add_parser("stats", help="mean question words and word overlap near the answer, beside other sets")
    s.add_argument("--out", type=Path, default=DEFAULT_OUT)
    s.add_argument("--compare", default="nq-long,squad-v1.1",
                   help="comma-separated sets to compare with (registered names or paths; '' for none)")
    s.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.cmd == "fetch":
        fetch(a.out, a.deb_dir, a.update_sources)
    elif a.cmd == "check":
        sys.exit(1 if check(a.out) else 0)
    else:
        stats(a.out, [n.strip() for n in a.compare.split(",") if n.strip()], a.json)


if __name__ == "__main__":
    main()
