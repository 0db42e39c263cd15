"""Usage, scoped: each record keeps who asked; only they may rate the answer; `usage forget --principal` erases one
person's records; `usage stats` counts by group; an exported gold document keeps its readers; a store of an earlier
format gains the columns."""

from __future__ import annotations

import sqlite3

from fastapi.testclient import TestClient

from declrag.access import AccessSettings, KeysFile
from declrag.cli import main
from declrag.config import ProgramConfig
from declrag.pipeline.program import RAGProgram
from declrag.serve import ServeSettings, create_app
from declrag.testing import HashEmbedder
from declrag.usage import RecordSettings, UsageStore, golden_rows

from tests.unit.access.test_leaks import CALLERS, corpus_store


def test_records_keep_the_caller_and_only_they_may_rate(capsys, tmp_path):
    store = corpus_store(str(tmp_path / "store"))
    keys = KeysFile(tmp_path / "keys.yaml")
    k = {n: keys.add(n, g) for n, g in CALLERS.items()}
    usage = str(tmp_path / "usage.sqlite3")
    cfg = ProgramConfig.model_validate({"generate": {"mode": "extractive"}})
    app = create_app(RAGProgram(cfg, store=store, embedder=HashEmbedder()), "x", None, ServeSettings(
        record=RecordSettings(target=usage), access=AccessSettings(keys_file=tmp_path / "keys.yaml")))
    auth = lambda who: {"Authorization": f"Bearer {k[who]}"}  # noqa: E731
    with TestClient(app) as c:
        while c.get("/readyz").status_code != 200:
            pass
        carol = c.post("/v1/ask", json={"question": "What is the NARWHAL budget for the third quarter?"},
                       headers=auth("carol")).json()
        bob = c.post("/v1/ask", json={"question": "When do PANGOLIN deploys run?"}, headers=auth("bob")).json()
        rating = {"id": carol["id"], "helpful": True, "citation": 1}
        r = c.post("/v1/feedback", json=rating, headers=auth("bob"))
        assert r.status_code == 403 and "another caller" in r.json()["error"]
        assert c.post("/v1/feedback", json=rating, headers=auth("carol")).status_code == 204
        assert c.post("/v1/feedback", json={"id": bob["id"], "helpful": True}, headers=auth("bob")).status_code == 204
    s = UsageStore(usage, create=False)
    records = {r["principal"]: r for r in s.records()}
    assert set(records) == {"carol", "bob"} and records["carol"]["groups"] == ["exec", "fin"]
    held = {p["doc_id"]: p.get("readers") for p in records["carol"]["passages"]}
    assert records["carol"]["feedback"]["helpful"] and held["fin-budget"] == ["exec", "fin"]
    assert held.get("old-notes", None) is None  # unlabelled: no readers kept
    gold = {r["question"]: r for r in golden_rows(s.records())}
    narwhal = gold["What is the NARWHAL budget for the third quarter?"]
    assert narwhal["metadata"]["readers"] == {"fin-budget": ["exec", "fin"]}
    s.close()
    assert main(["usage", "stats", usage]) == 0
    out = capsys.readouterr().out
    assert "asked by callers of group fin" in out and "asked by callers of group exec" in out
    assert main(["usage", "forget", usage, "--principal", "carol"]) == 0
    assert "deleted 1 answers" in capsys.readouterr().out
    s = UsageStore(usage, create=False)
    assert [r["principal"] for r in s.records()] == ["bob"] and s.counts()["helpful"] == 1  # carol's rating went too
    s.close()


def test_a_store_of_format_2_gains_who_asked(tmp_path):
    path = tmp_path / "old.sqlite3"
    UsageStore(path).close()
    with sqlite3.connect(path) as c:  # as format 2 made it: no principal, no groups
        c.execute("DROP INDEX ix_answers_principal")
        c.execute("ALTER TABLE answers DROP COLUMN principal")
        c.execute("ALTER TABLE answers DROP COLUMN groups")
        c.execute("UPDATE meta SET value = '2' WHERE key = 'format'")
        c.execute("INSERT INTO answers (id, ts, route, program, version, question, history, filter, passages, "
                  "citations, answer, abstained, latency_ms) VALUES ('a1', 1, '/v1/ask', 'p', 'v', 'q', '[]', "
                  "'null', '[]', '[]', 'a', 0, 1.0)")
    s = UsageStore(path)
    [r] = list(s.records())
    assert r["principal"] is None and r["groups"] is None
    assert s.add_feedback("a1", True) == "rated" and s.add_feedback("a1", True, principal="eve") == "forbidden"
    s.close()
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("3",)
