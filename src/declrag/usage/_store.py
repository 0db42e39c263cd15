"""The usage store: what `declrag serve` answered, and what its users said about it (docs/guides/usage.md).

One schema in SQLite (a file: the default, beside the run) or PostgreSQL (a ``postgresql+psycopg://`` URI: several
replicas or machines writing to one store), through SQLAlchemy Core. Two tables:

- ``answers``: one row per question answered (``/v1/ask``, ``/v1/chat/completions``, the web page, MCP) or searched
  (``/v1/search``): its id (the one the response carries), when, the route, the program's name and run and version,
  the question and the conversation before it, the filter, the passages retrieved (chunk, document, span, score),
  the citations, the answer, whether it abstained and why, the latency, and for an explored answer the rankers its
  passages were multileaved from (``explored``; `declrag.pipeline.stages.select`);
- ``feedback``: one row per answer rated (the last rating counts): helpful or not, the citation that answered, a
  corrected answer.

What is kept holds what users typed: questions can carry personal data. `retain` bounds it by rows and by age.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..errors import DeclragError

# the schema's version, in the ``meta`` table (2: ``answers.explored``; 3: ``answers.principal`` and ``groups``, who
# asked; a store of an earlier format gets the columns it lacks on opening)
FORMAT = 3
_meta = sa.MetaData()
ANSWERS = sa.Table(
    "answers", _meta,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("ts", sa.Float, nullable=False, index=True),
    sa.Column("route", sa.String(40), nullable=False),
    sa.Column("program", sa.String(200), nullable=False),  # the served name
    sa.Column("version", sa.String(80), nullable=False),  # the program's identity: its run and config digest
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("history", sa.Text, nullable=False),  # JSON: [{role, content}] before the question
    sa.Column("filter", sa.Text, nullable=False),  # JSON: the metadata filter, or null
    sa.Column("passages", sa.Text, nullable=False),  # JSON: [{chunk_id, doc_id, span, score}] in rank order
    sa.Column("citations", sa.Text, nullable=False),  # JSON: [{n, chunk_id, doc_id, span, quotes, hash, ...}]
    sa.Column("answer", sa.Text, nullable=True),  # None for a search
    sa.Column("abstained", sa.Boolean, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("latency_ms", sa.Float, nullable=False),
    sa.Column("explored", sa.Text, nullable=True),  # JSON: {served: settings, changes: [...]}, or null
    sa.Column("principal", sa.String(200), nullable=True, index=True),  # who asked (`declrag.access`); null: no callers
    sa.Column("groups", sa.Text, nullable=True),  # JSON: the caller's groups, or null
)
ADDED = ("explored", "principal", "groups")  # columns a store of an earlier format lacks (all text, nullable)
FEEDBACK = sa.Table(
    "feedback", _meta,
    sa.Column("id", sa.String(40), primary_key=True),  # the answer's id: one rating per answer, the last counts
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("helpful", sa.Boolean, nullable=False),
    sa.Column("citation", sa.Integer, nullable=True),  # the [n] that answered
    sa.Column("correction", sa.Text, nullable=True),
)
META = sa.Table("meta", _meta, sa.Column("key", sa.String(40), primary_key=True), sa.Column("value", sa.Text))
JSON_FIELDS = ("history", "filter", "passages", "citations", "explored", "groups")
COLUMNS = tuple(ANSWERS.c.keys())


def url_of(target: str | Path) -> str:
    """A SQLAlchemy URL: a ``postgresql...://`` or ``sqlite://`` URL as given, else a file path for SQLite."""
    s = str(target)
    if "://" in s:
        if not s.startswith(("postgresql", "sqlite")):
            raise DeclragError(f"usage store {s!r}: not a PostgreSQL URI nor a file",
                               hint="pass a file path (SQLite) or postgresql+psycopg://user@host/db")
        return s
    return f"sqlite:///{Path(s).expanduser().resolve()}"


def shown(target: str | Path) -> str:
    """The store as a log line may show it: a URI without its password."""
    s = str(target)
    return sa.engine.make_url(s).render_as_string(hide_password=True) if "://" in s else s


class UsageStore:
    """One usage store, opened (and its tables made) at ``target``. Thread-safe: SQLAlchemy pools connections."""

    def __init__(self, target: str | Path, create: bool = True):
        self.target = str(target)
        url = url_of(target)
        if url.startswith("sqlite:///") and create:
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        elif url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
            raise DeclragError(f"usage store {self.target!r} does not exist",
                               hint="pass the file `declrag serve` records to (its start-up line names it)")
        self.engine = sa.create_engine(url, pool_pre_ping=True)
        self.create = create
        if url.startswith("sqlite"):
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        for attempt in range(3):  # several server processes open one store at once: one creates, the others see it
            try:
                self._create()
                break
            except sa.exc.SQLAlchemyError as e:
                if attempt == 2:
                    raise DeclragError(f"cannot open the usage store {shown(target)}: {_short(e)}",
                                       hint="check the path's folder is writable, or the database URI and server"
                                       ) from e
                time.sleep(0.2 * (attempt + 1))

    def _create(self) -> None:
        with self.engine.begin() as c:
            _meta.create_all(c)
            found = c.execute(sa.select(META.c.value).where(META.c.key == "format")).scalar()
            if found is None:
                c.execute(META.insert().values(key="format", value=str(FORMAT)))
            elif int(found) > FORMAT:
                raise DeclragError(f"usage store {shown(self.target)} has format {found}, newer than this declrag's "
                                   f"({FORMAT})", hint="upgrade declrag, or record to another store")
            elif int(found) < FORMAT and self.create:  # the columns it lacks, null in its rows (none explored, ...)
                have = {col["name"] for col in sa.inspect(c).get_columns("answers")}
                for name in ADDED:
                    if name not in have:
                        kind = "VARCHAR(200)" if name == "principal" else "TEXT"
                        c.execute(sa.text(f"ALTER TABLE answers ADD COLUMN {name} {kind}"))
                c.execute(META.update().where(META.c.key == "format").values(value=str(FORMAT)))
            self.present = {col["name"] for col in sa.inspect(c).get_columns("answers")}  # an older store, read as is

    def close(self) -> None:
        self.engine.dispose()

    # -- writing ----------------------------------------------------------------------------------------------
    def add_answers(self, rows: Sequence[dict[str, Any]]) -> None:
        self.add_encoded([encode(r) for r in rows])

    def add_encoded(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert answers' rows made by `encode` (the recorder's queue holds them so)."""
        if rows:
            with self.engine.begin() as c:
                c.execute(ANSWERS.insert(), [dict(zip(COLUMNS, t)) for t in rows])

    def add_feedback(self, answer_id: str, helpful: bool, citation: int | None = None,
                     correction: str | None = None, principal: str | None = None) -> str:
        """Rate answer ``answer_id`` (a second rating replaces the first), as ``principal`` (None: a server without
        callers). Returns ``rated``, ``missing`` (no such answer recorded) or ``forbidden`` (the answer was given to
        another caller: only the one who received it may rate it)."""
        row = {"id": answer_id, "ts": time.time(), "helpful": helpful, "citation": citation, "correction": correction}
        with self.engine.begin() as c:
            found = c.execute(sa.select(ANSWERS.c.principal).where(ANSWERS.c.id == answer_id)).first()
            if found is None:
                return "missing"
            if found[0] != principal:
                return "forbidden"
            c.execute(FEEDBACK.delete().where(FEEDBACK.c.id == answer_id))
            c.execute(FEEDBACK.insert().values(**row))
        return "rated"

    def forget(self, principal: str) -> int:
        """Delete every answer (and rating) of one caller, as the law may ask; returns how many answers went."""
        with self.engine.begin() as c:
            return self._delete(c, ANSWERS.c.principal == principal)

    def retain(self, max_rows: int | None, max_days: float | None) -> int:
        """Delete the answers (and their ratings) older than ``max_days`` and beyond the newest ``max_rows``.
        Returns how many answers went."""
        gone = 0
        with self.engine.begin() as c:
            if max_days is not None:
                gone += self._delete(c, ANSWERS.c.ts < time.time() - max_days * 86400)
            if max_rows is not None:
                edge = c.execute(sa.select(ANSWERS.c.ts).order_by(ANSWERS.c.ts.desc()).offset(max_rows).limit(1)
                                 ).scalar()
                if edge is not None:
                    gone += self._delete(c, ANSWERS.c.ts <= edge)
        return gone

    @staticmethod
    def _delete(c: sa.Connection, cond: Any) -> int:
        c.execute(FEEDBACK.delete().where(FEEDBACK.c.id.in_(sa.select(ANSWERS.c.id).where(cond))))
        return c.execute(ANSWERS.delete().where(cond)).rowcount or 0

    # -- reading ----------------------------------------------------------------------------------------------
    def records(self) -> Iterator[dict[str, Any]]:
        """Every answer, oldest first, with its rating (``feedback``: None when unrated)."""
        cols = [col for col in ANSWERS.c if col.name in self.present]  # an earlier format's store, read as it is
        q = (sa.select(*cols, FEEDBACK.c.helpful, FEEDBACK.c.citation.label("rated_citation"),
                       FEEDBACK.c.correction)
             .select_from(ANSWERS.outerjoin(FEEDBACK, FEEDBACK.c.id == ANSWERS.c.id)).order_by(ANSWERS.c.ts))
        with self.engine.connect() as c:
            for row in c.execute(q).mappings():
                r = {k: (json.loads(row[k]) if k in JSON_FIELDS and row.get(k) is not None else row.get(k))
                     for k in ANSWERS.c.keys()}
                r["feedback"] = None if row["helpful"] is None else {
                    "helpful": bool(row["helpful"]), "citation": row["rated_citation"], "correction": row["correction"]}
                yield r

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as c:
            n = c.execute(sa.select(sa.func.count()).select_from(ANSWERS)).scalar() or 0
            rated = c.execute(sa.select(FEEDBACK.c.helpful, sa.func.count()).group_by(FEEDBACK.c.helpful)).all()
        by = {bool(h): k for h, k in rated}
        return {"answers": n, "helpful": by.get(True, 0), "not_helpful": by.get(False, 0)}


def encode(r: dict[str, Any]) -> tuple[Any, ...]:
    """An answer's row as the table holds it, in its columns' order: its nested fields as JSON text. A tuple of
    strings, numbers and None is untracked by Python's garbage collector at its first collection, so rows waiting in
    the recorder's queue add nothing to each later collection's work (`declrag.usage.recorder`)."""
    return tuple(json.dumps(r.get(k), ensure_ascii=False) if k in JSON_FIELDS else r.get(k) for k in COLUMNS)


def _sqlite_pragmas(conn, _record) -> None:
    cur = conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers (declrag usage) never block the server's writes
    cur.execute("PRAGMA synchronous=NORMAL")  # a kill -9 loses no committed batch; a power cut the last one
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def _short(e: BaseException) -> str:
    return str(getattr(e, "orig", None) or e).splitlines()[0]
