"""Where a compile's study lives, who may join it, and what it may still spend (docs/guides/many-machines.md).

One machine (the default): the run folder holds the study as Optuna's append-only journal (``study.journal``)
and the budget ledger as a small SQLite file (``budget.sqlite3``). Many machines: ``--storage URL`` (any
SQLAlchemy URL Optuna's RDBStorage accepts), where the study and the ledger are tables of that database. The URL
is kept and shown without its password.

Budgets are one row of ``declrag_budget`` per study: trial slots are taken with one conditional UPDATE
(atomic in PostgreSQL and SQLite), LM calls and cost are added with ``x = x + :d``, so any number of
workers overspend by at most what the trials in flight spend between two checks.
"""

from __future__ import annotations

import errno
import json
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
import sqlalchemy as sa
import sqlalchemy.exc as sx
from optuna.storages import JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend
from sqlalchemy.engine import URL, make_url

from ..errors import DeclragError

log = logging.getLogger(__name__)

HINT_START = "start one on loopback with: bash scripts/postgres.sh start (it prints the URL)"


def redact(url: str) -> str:
    """``url`` without its password (for files, logs and messages)."""
    try:
        u = make_url(url)
        if u.password is None:
            return url
        bare = URL.create(u.drivername, u.username, None, u.host, u.port, u.database, u.query)
        return bare.render_as_string(hide_password=False)
    except Exception:
        return url.split("@")[-1] if "@" in url else url


def has_password(url: str) -> bool:
    try:
        return make_url(url).password is not None
    except Exception:
        return False


def db_error(e: BaseException, url: str, doing: str = "opening the study database") -> DeclragError:
    """One clear message for what went wrong with the database at ``url``."""
    where = redact(url)
    if not isinstance(e, ModuleNotFoundError):
        e = db_cause(e)
    text = str(getattr(e, "orig", None) or e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    low = str(e).lower()
    if isinstance(e, ModuleNotFoundError) or "no module named" in low:
        return DeclragError(f"the database driver for {where} is not installed ({text})",
                            hint="pip install 'declrag[postgres]' (psycopg) for postgresql+psycopg:// URLs")
    if "could not parse" in low or "can't load plugin" in low or "invalid" in low and "url" in low:
        return DeclragError(f"--storage {where} is not a database URL Optuna can use ({text})",
                            hint="e.g. postgresql+psycopg://user@host:5432/db (any SQLAlchemy URL)")
    if "password authentication failed" in low or "no password supplied" in low or "authentication failed" in low:
        return DeclragError(f"the database at {where} refused the credentials ({text})",
                            hint="give the password as $PGPASSWORD or a ~/.pgpass line host:port:db:user:password")
    if "does not exist" in low and "database" in low:
        return DeclragError(f"the database in {where} does not exist ({text})",
                            hint="create it (createdb NAME) or point --storage at an existing one")
    if any(s in low for s in ("connection refused", "could not connect", "timeout expired", "timed out",
                              "name or service not known", "server closed the connection", "connection is closed",
                              "terminating connection", "connection failed", "no route to host")):
        return DeclragError(f"cannot reach the study database at {where} while {doing} ({text})",
                            hint=f"check that the server runs and the host and port are right; {HINT_START}")
    return DeclragError(f"the study database at {where} failed while {doing}: {text}",
                        hint="check the URL and the server's log")


DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
DISK_WORDS = ("disk is full", "No space left", "readonly database", "Read-only file system", "Disk quota")


def disk_stop(why: str, folder: Path) -> DeclragError:
    """The compile stopped because its run folder's disk is full or read-only: what was written stays."""
    return DeclragError(f"compile stopped: the run folder {folder} cannot be written ({why})",
                        hint=f"every finished trial is kept: free space on its disk (or make it writable), then "
                             f"continue with declrag compile --resume {folder}")


def is_db_error(e: BaseException | None) -> bool:
    """A lost or refused database connection (worth retrying), as opposed to a bug or bad input: the error
    itself or any error it arose from (Optuna's trial loop can fail on its own while reporting one)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (sx.OperationalError, sx.InterfaceError)) or \
                (isinstance(e, sx.DBAPIError) and e.connection_invalidated):
            return True
        e = e.__cause__ or e.__context__
    return False


def db_cause(e: BaseException) -> BaseException:
    """The database error ``e`` arose from (itself if none)."""
    x: BaseException | None = e
    while x is not None:
        if isinstance(x, sx.DBAPIError):
            return x
        x = x.__cause__ or x.__context__
    return e


def open_rdb(url: str, heartbeat_s: int):
    """Optuna's RDBStorage on ``url`` with the heartbeat, the one-retry callback and connection checks."""
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.startswith("postgresql"):
        kwargs["connect_args"] = {"connect_timeout": 10}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(url, engine_kwargs=kwargs, heartbeat_interval=heartbeat_s, grace_period=3 * heartbeat_s,
                              heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1))
    except Exception as e:  # noqa: BLE001 (driver, URL and connection errors arrive as many types)
        raise db_error(e, url) from None


@dataclass
class Place:
    """Where one study is: its Optuna storage, its name, its ledger, and how to reach it again."""

    storage: Any
    name: str
    ledger: Ledger
    url: str | None = None  # None: the run folder's journal

    @property
    def shown(self) -> str:
        return redact(self.url) if self.url else "the run folder's journal"

    @property
    def shared(self) -> bool:
        return self.url is not None


def place(out: Path, name: str, url: str | None = None, heartbeat_s: int = 10) -> Place:
    """The study ``name``: in the database at ``url``, or in the run folder ``out``."""
    if url:
        storage = open_rdb(url, heartbeat_s)
        return Place(storage, name, Ledger(storage.engine, name, url), url)
    storage = JournalStorage(JournalFileBackend(str(out / "study.journal")))
    engine = sa.create_engine(f"sqlite:///{out / 'budget.sqlite3'}", connect_args={"timeout": 60})
    return Place(storage, name, Ledger(engine, name, None))


def study_names(p: Place) -> list[str]:
    return [s.study_name for s in optuna.get_all_study_summaries(p.storage, include_best_trial=False)]


# -- the study's identity: what a worker must have to join it -------------------------------------------------
def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Dotted paths where two JSON values differ (``path: a != b``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    if a != b:
        return [f"{path}: {json.dumps(a, default=str)[:80]} != {json.dumps(b, default=str)[:80]}"]
    return []


def identity_of(p: Place) -> dict[str, Any]:
    """What the study ``p.name`` was created with (space, dataset, data digest, model): what a joiner runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        names = study_names(p)
        if p.name not in names:
            raise DeclragError(f"there is no study {p.name!r} in {p.shown} "
                               f"(studies there: {', '.join(names) or 'none'})",
                               hint=f"start it with: declrag compile --space ... --dataset ... --name {p.name} "
                                    "--storage URL")
        for _ in range(100):  # the creator sets it last, once the study and its ledger are ready
            if "declrag" in (attrs := optuna.load_study(study_name=p.name, storage=p.storage).user_attrs):
                return attrs["declrag"]
            time.sleep(0.1)
    raise DeclragError(f"the study {p.name!r} in {p.shown} was not made by declrag compile", hint="join another study")


def create_or_join(p: Place, identity: dict[str, Any], directions: list[Literal["maximize", "minimize"]],
                   sampler, pruner,
                   baseline: dict[str, Any], budget, join: bool, adopt: bool = False) -> tuple[optuna.Study, bool]:
    """Create the study (its ledger with ``budget``, the baseline queued once), or load it when it exists with
    the same identity (``join``: it must exist, and only the data is compared: the rest is the study's).
    ``adopt``: a study made before identities were recorded takes this one. Returns the study and whether
    this call created it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        exists = join or p.name in study_names(p)
        if not exists:
            try:
                study = optuna.create_study(storage=p.storage, study_name=p.name, directions=directions,
                                            sampler=sampler, pruner=pruner)
            except optuna.exceptions.DuplicatedStudyError:  # another worker created it a moment ago
                exists = True
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    study.enqueue_trial(baseline, user_attrs={"baseline": True})
                p.ledger.start(budget)
                study.set_user_attr("declrag", identity)  # last: joiners wait for it
                return study, True
        study = optuna.load_study(study_name=p.name, storage=p.storage, sampler=sampler, pruner=pruner)
    if adopt and "declrag" not in study.user_attrs:
        study.set_user_attr("declrag", identity)
    theirs = identity_of(p)
    mine = {k: v for k, v in identity.items() if k != "created"}
    diff = differences({k: v for k, v in theirs.items() if k != "created"}, mine) if not join else \
        differences({k: theirs.get(k) for k in ("data",)}, {k: identity[k] for k in ("data",)})
    if diff:
        what = "; ".join(d.replace("data:", "data (documents and split):", 1) for d in diff[:4])
        more = f" and {len(diff) - 4} more" if len(diff) > 4 else ""
        raise DeclragError(f"the study {p.name!r} in {p.shown} exists with another space or dataset ({what}{more}; "
                           "theirs != yours)", hint=f"pick another --name, or join it as it is: --join {p.name}")
    return study, False


# -- budgets ----------------------------------------------------------------------------------------------------
class Ledger:
    """The study's budgets and what all its workers have spent: one row, updated atomically."""

    def __init__(self, engine, study: str, url: str | None):
        self.engine, self.study, self.url = engine, study, url
        meta = sa.MetaData()
        self.t = sa.Table(
            "declrag_budget", meta,
            sa.Column("study", sa.String(512), primary_key=True),
            sa.Column("max_trials", sa.Integer), sa.Column("max_lm_calls", sa.Integer),
            sa.Column("max_cost_usd", sa.Float), sa.Column("timeout_s", sa.Float),
            sa.Column("started", sa.Float, nullable=False),
            sa.Column("trials", sa.Integer, nullable=False, default=0),
            sa.Column("lm_calls", sa.Integer, nullable=False, default=0),
            sa.Column("cached", sa.Integer, nullable=False, default=0),
            sa.Column("cost_usd", sa.Float, nullable=False, default=0.0))
        self._run(lambda c: meta.create_all(c), "creating the budget table")

    def _run(self, fn: Callable, doing: str):
        try:
            with self.engine.begin() as c:
                return fn(c)
        except Exception as e:
            if is_db_error(e) and self.url:
                raise
            if is_db_error(e):
                why = str(getattr(e, "orig", None) or e).splitlines()[0]
                raise DeclragError(f"the run folder's budget ledger failed while {doing}: {why}",
                                   hint="check the disk and the folder's permissions") from None
            raise

    def start(self, budget, spent: dict[str, float] | None = None) -> None:
        """Set the budgets (keeping the counts) and start the clock ``--timeout`` counts from; ``spent``: the
        counts of a new row (what a study made before it had a ledger already spent)."""
        vals = asdict(budget)  # max_trials, timeout_s, max_cost_usd, max_lm_calls

        def go(c):
            row = c.execute(sa.select(self.t).where(self.t.c.study == self.study)).first()
            if row is None:
                counts = {"trials": 0, "lm_calls": 0, "cached": 0, "cost_usd": 0.0, **(spent or {})}
                c.execute(sa.insert(self.t).values(study=self.study, started=time.time(), **vals, **counts))
            else:
                c.execute(sa.update(self.t).where(self.t.c.study == self.study).values(**vals, started=time.time()))

        self._run(go, "setting the budgets")

    def state(self) -> dict[str, Any]:
        row = self._run(lambda c: c.execute(sa.select(self.t).where(self.t.c.study == self.study)).first(),
                        "reading the budgets")
        if row is None:
            raise DeclragError(f"the study {self.study!r} has no budget row", hint="start it again with compile --name")
        return dict(row._mapping)

    def exhausted(self) -> str | None:
        """Which budget other than the trial count is used up, if any."""
        s = self.state()
        if s["max_lm_calls"] is not None and s["lm_calls"] >= s["max_lm_calls"]:
            return "max LM calls"
        if s["max_cost_usd"] is not None and s["cost_usd"] >= s["max_cost_usd"]:
            return "max cost"
        if s["timeout_s"] is not None and time.time() - s["started"] >= s["timeout_s"]:
            return "timeout"
        return None

    def take_trial(self) -> bool:
        """Take one trial slot; False when ``max_trials`` are taken (one conditional UPDATE: atomic)."""
        t = self.t
        q = sa.update(t).where(t.c.study == self.study, sa.or_(t.c.max_trials.is_(None), t.c.trials < t.c.max_trials)
                               ).values(trials=t.c.trials + 1)
        return self._run(lambda c: c.execute(q).rowcount, "taking a trial") == 1

    def give_back_trial(self) -> None:
        t = self.t
        self._run(lambda c: c.execute(sa.update(t).where(t.c.study == self.study, t.c.trials > 0)
                                      .values(trials=t.c.trials - 1)), "giving back a trial")

    def spend(self, lm_calls: int, cached: int, cost_usd: float) -> None:
        if not (lm_calls or cached or cost_usd):
            return
        t = self.t
        self._run(lambda c: c.execute(sa.update(t).where(t.c.study == self.study).values(
            lm_calls=t.c.lm_calls + int(lm_calls), cached=t.c.cached + int(cached),
            cost_usd=t.c.cost_usd + float(cost_usd))), "counting LM calls")


class Patience:
    """Retries with exponential backoff (1, 2, 4 ... 30 s) while the database is unreachable, for at most
    ``seconds`` in all; then the worker stops with `db_error`'s message."""

    def __init__(self, p: Place, seconds: float, progress: bool = True):
        self.p, self.seconds, self.progress = p, seconds, progress

    def wait(self, first: BaseException, doing: str) -> None:
        """Return once the database answers again; raise DeclragError when patience runs out."""
        t0, delay, err = time.monotonic(), 1.0, db_cause(first)
        while True:
            left = self.seconds - (time.monotonic() - t0)
            if left <= 0:
                e = db_error(err, self.p.url or "", doing)
                raise DeclragError(f"{e.message}; gave up after {self.seconds:.0f} s of retries",
                                   hint=f"finished trials are kept in the database; once it is back, continue with "
                                        f"declrag compile --resume RUN_FOLDER where the study was created, or "
                                        f"--join {self.p.name} --storage URL elsewhere ({e.hint})")
            msg = f"the study database at {self.p.shown} is unreachable ({str(err).splitlines()[0][:120]}); " \
                  f"retrying in {min(delay, left):.0f} s ({left:.0f} s of patience left)"
            if self.progress:
                from tqdm.auto import tqdm

                tqdm.write(msg)
            else:
                log.warning(msg)
            time.sleep(min(delay, left))
            delay = min(delay * 2, 30.0)
            try:
                with self.p.ledger.engine.connect() as c:
                    c.execute(sa.text("SELECT 1"))
                return
            except Exception as e:  # noqa: BLE001
                if not is_db_error(e):
                    raise
                err = db_cause(e)


def spent_before(study: optuna.Study) -> dict[str, Any]:
    """What a study's trials spent before it had a ledger (runs made before budgets lived in one)."""
    done = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    return {"trials": len(done), "lm_calls": sum(int(t.user_attrs.get("lm_calls") or 0) for t in study.trials),
            "cost_usd": sum(float(t.user_attrs.get("cost_usd") or 0) for t in study.trials)}


def retry_killed(study: optuna.Study) -> None:
    """A journal has one owner: a trial it lists as running was cut off when that process died. Mark it
    failed and queue it once more, as the database heartbeat does for a killed worker."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retry = RetryHeartbeatStaleTrialCallback(max_retry=1)
        for t in study.get_trials(states=(optuna.trial.TrialState.RUNNING,)):
            study.tell(t.number, state=optuna.trial.TrialState.FAIL)
            retry(study, study.trials[t.number])
