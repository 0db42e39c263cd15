"""`declrag index` says what it did: the parts of files it skipped, a run that indexed nothing (a non-zero exit), files
gone from the folder, and bad flags as one line each."""

from __future__ import annotations

import json

from declrag.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_a_run_that_indexes_nothing_fails_and_says_why(capsys, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "junk.pdf").write_bytes(b"not a pdf at all")
    (docs / "empty.md").write_text("\u200b\u200b\n")
    (docs / "photo.png").write_bytes(b"\x89PNG")
    code, out, err = run(capsys, "index", str(docs), "--store", str(tmp_path / "store"), "-q")
    assert code == 2 and "Traceback" not in out + err
    assert "0 documents indexed" in out and "3 skipped" in out
    assert "nothing could be indexed: every file was skipped (the reasons are above)" in err
    assert "junk.pdf: corrupt PDF" in err and "empty.md: no visible text" in err
    empty = tmp_path / "nothing"
    empty.mkdir()
    code, _, err = run(capsys, "index", str(empty), "--store", str(tmp_path / "store"), "-q")
    assert code == 2 and "no supported file was found" in err


def test_a_rebuild_that_indexes_nothing_keeps_the_store(capsys, tmp_path):
    docs, store = tmp_path / "docs", str(tmp_path / "store")
    docs.mkdir()
    (docs / "a.txt").write_text("The night ferry leaves the harbour at ten past eleven.")
    assert run(capsys, "index", str(docs), "--store", store, "-q")[0] == 0
    (docs / "a.txt").unlink()
    (docs / "b.jsonl").write_text('{"text": null}\n')
    code, _, err = run(capsys, "index", str(docs), "--store", store, "--rebuild", "-q")
    assert code == 2 and "the store was left as it was" in err
    code, out, _ = run(capsys, "search", "night ferry", "--store", store, "--json")
    assert code == 0 and json.loads(out)[0]["text"].startswith("The night ferry")


def test_records_and_pages_skipped_are_named_and_counted(capsys, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rows.jsonl").write_text('{"id": "a", "text": "The rink opens at noon."}\n{"id": "b", "text": 7}\n'
                                     '{"id": "c", "text": "The pool closes at nine."\n')
    code, out, err = run(capsys, "index", str(docs), "--store", str(tmp_path / "store"), "-q")
    assert code == 0, err
    assert "1 documents indexed" in out and "0 skipped (and 2 records of files read)" in out
    lines = err.strip().splitlines()
    assert any(line.startswith("skipped ") and "rows.jsonl:2: " in line and "must be a string" in line
               and line.endswith("fix the record or remove the line") for line in lines)
    assert any("rows.jsonl:3: not valid JSON" in line for line in lines)


def test_many_files_skipped_for_one_reason_are_counted_and_a_corrupt_one_still_named(capsys, tmp_path):
    # a docs folder of 40 images and one corrupt PDF: a few lines, the PDF among them; --verbose names every image
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nThe backup runs at two in the morning.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 cut short")
    for i in range(40):
        (docs / f"shot-{i:02d}.png").write_bytes(b"\x89PNG")
    code, out, err = run(capsys, "index", str(docs), "--store", str(tmp_path / "store"), "-q")
    lines = err.strip().splitlines()
    assert code == 0 and "1 documents indexed" in out and "41 skipped" in out
    assert sum("shot-" in line for line in lines) == 3, lines
    assert "... and 37 more skipped: unsupported file type .png (--verbose names each)" in lines
    assert any("broken.pdf: corrupt PDF" in line for line in lines) and len(lines) == 5, lines
    code, _, err = run(capsys, "index", str(docs), "--store", str(tmp_path / "store2"), "-q", "--verbose")
    assert code == 0 and sum("shot-" in line for line in err.splitlines()) == 40 and "more skipped" not in err


def test_files_gone_from_the_folder_are_named_until_pruned(capsys, tmp_path):
    docs, store = tmp_path / "docs", str(tmp_path / "store")
    docs.mkdir()
    (docs / "a.txt").write_text("Apples are picked in September.")
    (docs / "b.txt").write_text("Bees swarm in May.")
    assert run(capsys, "index", str(docs), "--store", store, "-q")[0] == 0
    (docs / "b.txt").unlink()
    code, out, err = run(capsys, "index", str(docs), "--store", store, "-q")
    assert code == 0
    assert f"gone from the folder, still in the store: {(docs / 'b.txt').resolve()}" in err
    assert "1 file in the store no longer in the folder (--prune removes them)" in out
    code, out, err = run(capsys, "index", str(docs), "--store", store, "--prune", "-q")
    assert code == 0 and "1 removed" in out and "gone from the folder" not in err


def test_bad_reading_flags_are_one_line(capsys, tmp_path):
    (tmp_path / "a.txt").write_text("text")
    code, out, err = run(capsys, "index", str(tmp_path / "a.txt"), "--store", str(tmp_path / "s"),
                         "--pdf-reader", "acrobat", "-q")
    assert code == 2 and "unknown --pdf-reader 'acrobat'" in err and "pdfium, pypdf" in err
    assert "Traceback" not in out + err
