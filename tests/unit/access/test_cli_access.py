"""The CLI's side of access: `declrag keys`, `index --readers-file`, and `ask`/`search --as NAME` seeing what that
caller would see; each mistake one line, exit 2."""

from __future__ import annotations

import json

from tests.unit.cli.test_cli import run


def test_keys_readers_and_as(capsys, tmp_path):
    docs = tmp_path / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "hr" / "pay.md").write_text("The QUOKKA salary band for senior staff is capped at 180,000 euros.")
    (docs / "handbook.md").write_text("The office opens at 8 am and the QUOKKA canteen at noon.")
    (docs / "notes.md").write_text("QUOKKA notes from the offsite, with no readers given.")
    rules = tmp_path / "rules.yaml"
    rules.write_text('"docs/hr/*": hr\n"docs/handbook.md": "*"\n')
    keys, store = str(tmp_path / "keys.yaml"), str(tmp_path / "store")
    code, out, err = run(capsys, "keys", "add", "alice", "--groups", "hr", "--file", keys)
    assert code == 0 and out.strip().startswith("dr_") and "shown once" in err
    assert run(capsys, "keys", "add", "bob", "--groups", "eng", "--file", keys)[0] == 0
    code, out, err = run(capsys, "index", str(docs), "--store", store, "--readers-file", str(rules), "-q")
    assert code == 0, err

    def seen(*args: str) -> set[str]:
        code, out, err = run(capsys, "search", "QUOKKA", "--store", store, "--keys", keys, "--json", *args)
        assert code == 0, err
        return {h["source"].rsplit("/", 1)[-1] for h in json.loads(out)}

    assert seen() == {"pay.md", "handbook.md", "notes.md"}  # no --as: the administrator sees everything
    assert seen("--as", "alice") == {"pay.md", "handbook.md", "notes.md"}
    assert seen("--as", "bob") == {"handbook.md", "notes.md"}
    assert seen("--as", "bob", "--unlabelled", "nobody") == {"handbook.md"}
    assert seen("--as", "bob", "--where", '{"$or": [{"source": {"$ne": "x"}}, {"readers": "hr"}]}') == \
        {"handbook.md", "notes.md"}
    code, out, err = run(capsys, "ask", "What is the QUOKKA salary band?", "--store", store, "--keys", keys,
                         "--as", "bob", "--answer-mode", "extractive", "--json")
    assert code == 0 and "180,000" not in out and "pay.md" not in out, out

    for args, message in [(("keys", "add", "alice", "--groups", "x", "--file", keys), "already has a caller"),
                          (("keys", "rm", "carol", "--file", keys), "no caller named 'carol'"),
                          (("search", "x", "--store", store, "--keys", keys, "--as", "carol"), "no caller named"),
                          (("search", "x", "--store", store, "--keys", keys, "--as", "bob", "--unlabelled", "some"),
                           "use everyone or nobody"),
                          (("keys", "list", "--file", str(tmp_path / "none.yaml")), "no keys file at"),
                          (("serve", "--store", store, "--unlabelled", "nobody"), "go with callers")]:
        code, out, err = run(capsys, *args)
        assert code == 2 and message in err and "Traceback" not in err, (args, err)
    code, out, _ = run(capsys, "keys", "list", "--file", keys)
    assert "alice" in out and "hr" in out and "dr_" not in out
