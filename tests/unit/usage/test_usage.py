"""Learning from use (`declrag.usage`): the store, the recorder off the request path, the golden set it exports,
and `declrag serve` recording each answer and taking ratings on POST /v1/feedback."""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest
from fastapi.testclient import TestClient

from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.pipeline.program import RAGProgram
from declrag.serve import ServeSettings, create_app
from declrag.testing import HashEmbedder, ScriptedLM
from declrag.usage import Recorder, RecordSettings, UsageStore, golden_rows
from declrag.usage import recorder as recorder_module

from tests.conftest import filled_store

Q = "What is the capital of Italy?"


def row(i: int, question: str = Q, **kw) -> dict:
    return {"id": f"a{i}", "ts": time.time() + i, "route": "/v1/ask", "program": "demo", "version": "v1",
            "question": question, "history": [], "filter": None,
            "passages": [{"chunk_id": "c1", "doc_id": "d1", "span": [0, 40], "score": 0.9},
                         {"chunk_id": "c2", "doc_id": "d2", "span": [10, 50], "score": 0.5}],
            "citations": [{"n": 1, "chunk_id": "c1", "doc_id": "d1", "span": [0, 40]},
                          {"n": 2, "chunk_id": "c2", "doc_id": "d2", "span": [10, 50]}],
            "answer": "Rome [1].", "abstained": False, "reason": None, "latency_ms": 12.0, **kw}


def test_the_store_keeps_answers_and_the_last_rating_and_forgets_beyond_its_bounds(tmp_path):
    s = UsageStore(tmp_path / "u.sqlite3")
    s.add_answers([row(i) for i in range(5)])
    assert s.add_feedback("a1", True, citation=1) == s.add_feedback("a1", False) == "rated"  # the last rating counts
    assert s.add_feedback("nope", True) == "missing"
    recs = {r["id"]: r for r in s.records()}
    assert recs["a1"]["feedback"] == {"helpful": False, "citation": None, "correction": None}
    assert recs["a0"]["feedback"] is None and recs["a0"]["passages"][0]["span"] == [0, 40]
    assert s.counts() == {"answers": 5, "helpful": 0, "not_helpful": 1}
    assert s.retain(max_rows=2, max_days=None) == 3 and [r["id"] for r in s.records()] == ["a3", "a4"]
    s.add_answers([row(9, ts=time.time() - 3 * 86400)])
    assert s.retain(max_rows=None, max_days=1) == 1
    assert s.counts()["answers"] == 2 and s.counts()["not_helpful"] == 0  # a1's rating went with it
    s.close()
    with pytest.raises(DeclragError, match="does not exist"):
        UsageStore(tmp_path / "other.sqlite3", create=False)
    with pytest.raises(DeclragError, match="not a PostgreSQL URI nor a file"):
        UsageStore("mysql://x/y")


def test_the_recorder_writes_in_batches_off_the_callers_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_module, "FLUSH_S", 0.05)
    r = Recorder(RecordSettings(target=str(tmp_path / "u.sqlite3")))
    t0 = time.perf_counter()
    for i in range(500):
        r.record(row(i, question=f"q{i}"))
    assert time.perf_counter() - t0 < 1.0  # queued, not written, on this thread
    assert r.feedback("a499", True, 1, None) == "rated"  # the rating waits for its answer to be written
    r.close()
    assert r.written == 500 and r.dropped == 0
    with sqlite3.connect(tmp_path / "u.sqlite3") as c:
        assert c.execute("select count(*) from answers").fetchone() == (500,)


def test_a_store_that_fails_drops_and_counts_and_says_so_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(recorder_module, "FLUSH_S", 0.05)
    r = Recorder(RecordSettings(target=str(tmp_path / "u.sqlite3")))

    def full(rows):
        raise OSError("database or disk is full")

    monkeypatch.setattr(r.store, "add_encoded", full)
    for i in range(3):
        r.record(row(i))
        r.flush()
    assert r.dropped == 3 and r.written == 0 and caplog.text.count("cannot write") == 1
    monkeypatch.undo()
    r.record(row(7))
    r.close()
    assert r.written == 1 and "writing again" in caplog.text


def test_usage_makes_a_golden_set_with_what_the_ratings_say():
    recs = [row(0), row(1, question="  what is the CAPITAL of italy? "), row(2, question="Who wrote it?"),
            row(3, question="Where is Milan?"), {**row(4, question="searched"), "answer": None}]
    recs[1]["feedback"] = {"helpful": True, "citation": 2, "correction": None}  # the same question, rated
    recs[2]["feedback"] = {"helpful": False, "citation": None, "correction": "Dante"}
    for r in (recs[0], recs[3], recs[4]):
        r["feedback"] = None
    rows = {r["question"].strip(): r for r in golden_rows(recs)}
    assert len(rows) == 3  # one per distinct question; the search has no answer to rate
    rome = rows[Q]
    assert rome["spans"] == [{"doc": "d2", "start": 10, "end": 50}] and rome["gold"] == {"d2": 1}
    assert rome["metadata"]["asked"] == 2 and rome["metadata"]["rating"] == "helpful"
    dante = rows["Who wrote it?"]
    assert "gold" not in dante and dante["metadata"]["negatives"] == ["c1", "c2"] and dante["answers"] == ["Dante"]
    assert rows["Where is Milan?"]["metadata"]["unrated"] is True


def test_a_helpful_citations_gold_is_the_words_the_answer_took_from_it_where_recorded():
    """The gold of "passage n answered" is what the answer quoted from it, not the whole passage: a passage is as long
    as the program that found it made it (a window's neighbours), and the export must not favour that program."""
    cited = [{"n": 1, "chunk_id": "c1", "doc_id": "d1", "span": [0, 3000], "quotes": [[1200, 1260], [1300, 1340]]},
             {"n": 2, "chunk_id": "c2", "doc_id": "d2", "span": [10, 50]}]
    payload = {"id": "a1", "answer": "Rome [1].", "abstained": False, "citations": cited}
    kept = recorder_module.row_of(payload, [], route="/v1/ask", program="demo", version="v1", question=Q,
                                  where=None, history=())
    assert kept["citations"][0]["quotes"] == [[1200, 1260], [1300, 1340]] and "quotes" not in kept["citations"][1]
    one, two = ({**kept, "id": f"a{i}", "question": f"q{i}",
                 "feedback": {"helpful": True, "citation": i, "correction": None}} for i in (1, 2))
    rows = {r["question"]: r for r in golden_rows([one, two])}
    assert rows["q1"]["spans"] == [{"doc": "d1", "start": 1200, "end": 1260}, {"doc": "d1", "start": 1300, "end": 1340}]
    assert rows["q2"]["spans"] == [{"doc": "d2", "start": 10, "end": 50}]  # no quotes recorded: the passage


def test_an_abstentions_nearest_passages_are_gold_only_when_the_rating_names_one():
    near = [{**c, "nearest": True} for c in row(0)["citations"]]
    recs = [{**row(0, question="q0"), "answer": "I don't know.", "abstained": True, "citations": near},
            {**row(1, question="q1"), "answer": "I don't know.", "abstained": True, "citations": near}]
    recs[0]["feedback"] = {"helpful": True, "citation": None, "correction": None}
    recs[1]["feedback"] = {"helpful": True, "citation": 2, "correction": None}  # "passage 2 answered it"
    rows = {r["question"]: r for r in golden_rows(recs)}
    assert "gold" not in rows["q0"] and rows["q0"]["metadata"]["rating"] == "helpful"
    assert rows["q1"]["gold"] == {"d2": 1} and rows["q1"]["spans"] == [{"doc": "d2", "start": 10, "end": 50}]
    payload = {"id": "a9", "answer": "I don't know.", "abstained": True, "citations": near}
    kept = recorder_module.row_of(payload, [], route="/v1/ask", program="demo", version="v1", question="q",
                                  where=None, history=())
    assert [c.get("nearest") for c in kept["citations"]] == [True, True]  # what the export reads


# -- declrag serve ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    return RAGProgram(ProgramConfig(), store=filled_store(tmp_path_factory.mktemp("usage") / "store"),
                      embedder=HashEmbedder())


def served(prog, **settings):
    app = create_app(prog, "demo", "runs/demo/best", ServeSettings(**settings),
                     lm_override=lambda: ScriptedLM({}, {"answer": "Rome is the capital of Italy [1]."}))
    client = TestClient(app)
    client.__enter__()
    deadline = time.monotonic() + 30
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return client


def test_serve_records_each_answer_and_takes_its_rating(prog, tmp_path):
    path = tmp_path / "usage.sqlite3"
    client = served(prog, record=RecordSettings(target=str(path)))
    try:
        a = client.post("/v1/ask", json={"question": Q}).json()
        chat = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": Q}]}).json()
        hits = client.post("/v1/search", json={"query": "Italy", "k": 2}).json()
        assert a["id"] and chat["id"] == f"chatcmpl-{chat['id'].removeprefix('chatcmpl-')}" and hits["id"]
        assert client.post("/v1/feedback", json={"id": a["id"], "helpful": True, "citation": 1}).status_code == 204
        assert client.post("/v1/feedback", json={"id": chat["id"], "helpful": False}).status_code == 204
        r = client.post("/v1/feedback", json={"id": "f" * 32, "helpful": True})
        assert r.status_code == 404 and "no answer" in r.json()["error"]
        assert client.post("/v1/feedback", json={"id": a["id"], "helpful": "yes"}).status_code == 422
        assert client.post("/v1/feedback", json={"id": a["id"], "helpful": True, "correction": "x" * 5000}
                           ).status_code == 422
        deadline = time.monotonic() + 10  # the three answers written by the recorder's thread, none dropped
        while 'declrag_usage_records{state="written"} 3.0' not in (m := client.get("/metrics").text):
            assert time.monotonic() < deadline, m
            time.sleep(0.1)
        assert 'declrag_usage_records{state="dropped"} 0.0' in m
    finally:
        client.__exit__(None, None, None)
    recs = {r["id"]: r for r in UsageStore(path, create=False).records()}
    assert set(recs) == {a["id"], chat["id"].removeprefix("chatcmpl-"), hits["id"]}
    mine = recs[a["id"]]
    assert mine["question"] == Q and mine["answer"] == a["answer"] and mine["route"] == "/v1/ask"
    assert mine["passages"] and mine["citations"][0]["doc_id"] == a["citations"][0]["doc_id"]
    assert mine["feedback"]["helpful"] is True and mine["version"]
    assert recs[hits["id"]]["answer"] is None and recs[hits["id"]]["route"] == "/v1/search"
    assert recs[chat["id"].removeprefix("chatcmpl-")]["feedback"]["helpful"] is False


def test_serve_explores_a_share_and_the_export_keeps_which_rankers(prog, tmp_path):
    path = tmp_path / "usage.sqlite3"
    client = served(prog, record=RecordSettings(target=str(path), explore=1.0))
    try:
        ids = [client.post("/v1/ask", json={"question": f"{Q} ({i})"}).json()["id"] for i in range(3)]
        assert client.post("/v1/feedback", json={"id": ids[0], "helpful": True, "citation": 1}).status_code == 204
        assert client.post("/v1/feedback", json={"id": ids[1], "helpful": False}).status_code == 204
    finally:
        client.__exit__(None, None, None)
        prog.explorer = None  # the module's program, as the other tests expect it
    recs = list(UsageStore(path, create=False).records())
    assert len(recs) == 3 and all(r["explored"]["served"]["retrieve.alpha"] == 0.5 for r in recs)
    assert {"retrieve.alpha": 0.75} in recs[0]["explored"]["changes"]
    rows = {r["id"]: r for r in golden_rows(recs)}
    rated = [r for r in rows.values() if r["metadata"].get("rating") == "helpful"]
    assert len(rated) == 1 and rated[0]["metadata"]["explored"] == recs[0]["explored"]
    assert not any("explored" in r["metadata"] for r in rows.values() if r is not rated[0])  # only gold carries it


def test_a_format_1_store_gains_the_explored_column_and_reads_as_it_was(tmp_path):
    path = tmp_path / "old.sqlite3"
    UsageStore(path).add_answers([row(0)])
    with sqlite3.connect(path) as c:  # as declrag wrote it before exploring: no column, format 1
        c.execute("ALTER TABLE answers DROP COLUMN explored")
        c.execute("UPDATE meta SET value = '1' WHERE key = 'format'")
    (r,) = UsageStore(path, create=False).records()  # read as it is, not written to
    assert r["explored"] is None and r["question"] == Q
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("1",)
    store = UsageStore(path)  # opened to record: the column added, the format raised
    store.add_answers([row(1, explored={"served": {"retrieve.alpha": 0.5}, "changes": []})])
    assert [r["explored"] for r in store.records()] == [None, {"served": {"retrieve.alpha": 0.5}, "changes": []}]
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("3",)


def test_serve_without_recording_answers_404_to_a_rating(prog):
    client = served(prog)
    try:
        a = client.post("/v1/ask", json={"question": Q}).json()
        r = client.post("/v1/feedback", json={"id": a["id"], "helpful": True})
        assert r.status_code == 404 and "records nothing" in r.json()["error"]
    finally:
        client.__exit__(None, None, None)


def test_usage_stats_and_export_on_the_command_line(tmp_path, capsys):
    from declrag.cli import main

    s = UsageStore(tmp_path / "u.sqlite3")
    s.add_answers([row(0), row(1, question="Who wrote it?")])
    s.add_feedback("a0", True, 1)
    s.close()
    assert main(["usage", "stats", str(tmp_path / "u.sqlite3")]) in (0, None)
    assert "rated helpful / not helpful" in capsys.readouterr().out
    assert main(["usage", "export", str(tmp_path / "u.sqlite3"), "--out", str(tmp_path / "set")]) in (0, None)
    assert "wrote 2 questions" in capsys.readouterr().out
    lines = [json.loads(x) for x in (tmp_path / "set" / "questions.jsonl").read_text().splitlines()]
    assert lines[0]["spans"] == [{"doc": "d1", "start": 0, "end": 40}]
    assert main(["usage", "stats", str(tmp_path / "missing.sqlite3")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err


def test_serve_records_by_default_in_the_run_folder_else_beside_the_local_store():
    from pathlib import Path

    from declrag.serve import record_beside

    assert record_beside("runs/first/best", None) == Path("runs/first/usage.sqlite3")
    assert record_beside(None, "/data/my-store") == Path("/data/my-store.usage.sqlite3")
    assert record_beside(None, "weaviate://127.0.0.1:8080/?grpc=50051") == Path(".declrag/usage.sqlite3")
    assert record_beside(None, None) == Path(os.environ["DECLRAG_STORE"] + ".usage.sqlite3")  # the default store


def test_a_server_killed_with_sigkill_loses_at_most_its_last_second_of_records(tmp_path, serve_process):
    """A real `declrag serve` process asked questions that never repeat, then SIGKILLed while they go on: the usage
    store opens afterwards, and every answer given more than a flush period (`FLUSH_S`, with room for a busy machine)
    before the kill is in it."""
    import signal
    import threading

    import httpx

    db = tmp_path / "usage.sqlite3"
    proc, base = serve_process(settings=f", record=RecordSettings(target={str(db)!r})")
    answered, stop = [], threading.Event()
    try:
        def ask() -> None:
            with httpx.Client(base_url=base, timeout=30) as c:
                for i in range(10_000):
                    if stop.is_set():
                        return
                    try:
                        r = c.post("/v1/ask", json={"question": f"Which city is number {i} on the list of capitals?"})
                    except httpx.TransportError:
                        return
                    answered.append((time.monotonic(), r.json()["id"]))

        t = threading.Thread(target=ask)
        t.start()
        time.sleep(6)
        killed = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        stop.set()
        t.join(30)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    kept = {r["id"] for r in UsageStore(db, create=False).records()}
    # a flush period, with room for a busy machine (the writer thread waits for the interpreter lock too)
    early = [i for at, i in answered if at < killed - 2.5 * recorder_module.FLUSH_S]
    assert len(early) >= 3, answered  # the server answered for some seconds before the kill
    assert set(early) <= kept, f"{len(set(early) - kept)} of {len(early)} early answers lost"
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_seeded_explorer_explores_a_replay_alike(prog, tmp_path):
    """`serve --explore-seed`: the same questions asked in the same order are explored alike (which questions, and
    the passages multileaved), so that `declrag bench usage` replays are reproducible."""
    def replayed(name: str) -> list[tuple[str, bool, list[str]]]:
        path = tmp_path / f"{name}.sqlite3"
        client = served(prog, record=RecordSettings(target=str(path), explore=0.5, explore_seed=7))
        try:
            for i in range(12):
                client.post("/v1/ask", json={"question": f"{Q} ({i})"}).raise_for_status()
        finally:
            client.__exit__(None, None, None)
            prog.explorer = None  # the module's program, as the other tests expect it
        return [(r["question"], r["explored"] is not None, [p["chunk_id"] for p in r["passages"]])
                for r in UsageStore(path, create=False).records()]

    first, again = replayed("first"), replayed("again")
    assert first == again
    assert 0 < sum(e for _, e, _ in first) < 12  # a share explored, not all or none


def test_a_queued_row_waits_encoded_where_the_garbage_collector_stops_looking(tmp_path):
    """Up to a second of rows waits in the recorder's queue: as nested dicts every collection on the request threads
    scanned them (-6% to -9% requests/s on JSON requests); encoded, a row is untracked at the first collection, and the
    store reads back what it was given."""
    import gc

    from declrag.usage._store import encode

    r = row(0, explored={"served": {"retrieve.alpha": 0.5}, "changes": []})
    waiting = ("answer", encode(r))
    assert gc.is_tracked(r)  # a row as built: nested dicts and lists, tracked for good
    gc.collect(0)
    assert not gc.is_tracked(waiting[1])  # encoded: untracked at the first collection
    s = UsageStore(tmp_path / "u.sqlite3")
    s.add_encoded([waiting[1]])
    s.add_answers([row(1)])
    got = {x["id"]: x for x in s.records()}
    s.close()
    assert {k: got["a0"][k] for k in r} == r and got["a1"]["passages"] == row(1)["passages"]
