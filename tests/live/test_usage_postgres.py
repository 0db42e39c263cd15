"""The usage store on a real PostgreSQL (started by the tests from scripts/postgres.sh): an explored answer's
record round-trips, and a store written before exploring (format 1) is read as it is, then gains its column when
opened to record."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from declrag.usage import UsageStore

pytestmark = pytest.mark.postgres

EXPLORED = {"served": {"retrieve.alpha": 0.5}, "changes": [{"retrieve.alpha": 0.75}]}


def answer(i: int, **kw) -> dict:
    return {"id": f"pg{i}", "ts": time.time() + i, "route": "/v1/ask", "program": "demo", "version": "v1",
            "question": f"q{i}", "history": [], "filter": None, "passages": [], "citations": [], "answer": "a",
            "abstained": False, "reason": None, "latency_ms": 1.0, **kw}


def test_an_explored_record_and_a_format_1_store_on_postgres(postgres_url):
    engine = sa.create_engine(postgres_url)
    try:
        store = UsageStore(postgres_url)
        store.add_answers([answer(0), answer(1, explored=EXPLORED)])
        assert [r["explored"] for r in store.records()] == [None, EXPLORED]
        store.close()
        with engine.begin() as c:  # as declrag wrote it before exploring: no column, format 1
            c.execute(sa.text("ALTER TABLE answers DROP COLUMN explored"))
            c.execute(sa.text("UPDATE meta SET value = '1' WHERE key = 'format'"))
        old = UsageStore(postgres_url, create=False)
        assert [r["explored"] for r in old.records()] == [None, None]  # read as it is, nothing written
        old.close()
        with engine.connect() as c:
            assert c.execute(sa.text("SELECT value FROM meta WHERE key = 'format'")).scalar() == "1"
        store = UsageStore(postgres_url)  # opened to record: the column added, the format raised
        store.add_answers([answer(2, explored=EXPLORED)])
        assert [r["explored"] for r in store.records()] == [None, None, EXPLORED]
        assert [r["principal"] for r in store.records()] == [None, None, None]  # format 3's columns too
        store.close()
        with engine.connect() as c:
            assert c.execute(sa.text("SELECT value FROM meta WHERE key = 'format'")).scalar() == "3"
    finally:
        with engine.begin() as c:
            for table in ("feedback", "answers", "meta"):
                c.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()
