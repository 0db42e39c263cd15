"""`declrag compile` on a study in a real PostgreSQL server (started by the tests from scripts/postgres.sh):
two worker processes share one study, a worker killed with SIGKILL mid-trial has its trial retried once by
the other, the budgets hold across both, a lost database stops a worker cleanly, and bad input is refused
with a clear message. The LM is scripted (metered like a paid model) and slowed down so that trials overlap."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import optuna
import pytest

from declrag.cli import main as cli

from tests.conftest import free_port, start_postgres, stop_postgres
from tests.unit.optimize.test_compile import GOLD
from tests.unit.optimize.test_compile import SPACE as TINY

pytestmark = pytest.mark.postgres

# the tiny space of test_compile, without prompt optimization (the finalizer's part is not what is tested here)
SPACE = TINY.replace("{name: bootstrap, max_demos: 1, max_examples: 4}", "{name: none}")
assert SPACE != TINY

WORKER = textwrap.dedent("""
    import sys
    from declrag.errors import DeclragError
    from declrag.lm import using_lm
    from declrag.optimize import Budget, CompileOptions, compile
    from declrag.testing import ScriptedLM

    role, storage, runs, name, space, gold, trials, calls, delay, patience = sys.argv[1:11]
    lm = ScriptedLM({"passage number in brackets": {"answer": "Paris [1]"}}, {"answer": "It is in [1]."},
                    delay=float(delay), cost_usd=0.001)
    with using_lm(lm):
        try:
            if role == "start":
                budget = Budget(max_trials=int(trials) or None, max_lm_calls=int(calls) or None)
                compile(CompileOptions(space, gold, name, runs, budget, progress=False, storage=storage, heartbeat_s=1,
                                       patience_s=float(patience)))
            else:
                compile(CompileOptions(runs=runs, join=name, storage=storage, progress=False, heartbeat_s=1,
                                       patience_s=float(patience)))
        except DeclragError as e:
            print(f"error: {e.message}", f"  fix: {e.hint}", sep=chr(10), file=sys.stderr)
            sys.exit(2)
""")


@pytest.fixture
def space(tmp_path):
    f = tmp_path / "space.yaml"
    f.write_text(SPACE)
    return f


def worker(tmp_path, role, url, runs, name, space, trials=0, calls=0, delay=0.3, patience=60):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    log = open(tmp_path / f"{role}-{uuid.uuid4().hex[:6]}.log", "w")
    proc = subprocess.Popen([sys.executable, str(script), role, url, str(runs), name, str(space), str(GOLD), str(trials),
                             str(calls), str(delay), str(patience)], stdout=log, stderr=subprocess.STDOUT)
    proc.log = Path(log.name)
    return proc


_STORAGES: dict[str, optuna.storages.RDBStorage] = {}


def load(url, name):
    # one storage (one connection pool) per server: a new one per poll would use up the server's connections
    if url not in _STORAGES:
        _STORAGES[url] = optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
    return optuna.load_study(study_name=name, storage=_STORAGES[url])


def wait_for(cond, timeout=300, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (v := cond()):
            return v
        time.sleep(step)
    raise AssertionError("timed out")


def ledger(url, name):
    import sqlalchemy as sa

    eng = sa.create_engine(url)
    with eng.connect() as c:
        row = c.execute(sa.text("SELECT * FROM declrag_budget WHERE study = :s"), {"s": name}).mappings().first()
    eng.dispose()
    return dict(row)


def study_exists(url, name):
    try:
        return "declrag" in load(url, name).user_attrs
    except KeyError:
        return False


def test_two_workers_one_killed_mid_trial_the_other_finishes(postgres_url, space, tmp_path):
    name = f"kill-{uuid.uuid4().hex[:8]}"
    max_trials = 10
    a = worker(tmp_path, "start", postgres_url, tmp_path / "a", name, space, trials=max_trials, delay=0.8)
    wait_for(lambda: study_exists(postgres_url, name))
    b = worker(tmp_path, "join", postgres_url, tmp_path / "b", name, space, delay=0.8)  # another "machine"
    b_id = f"{socket.gethostname()}:{b.pid}"

    def b_mid_trial():
        return [t for t in load(postgres_url, name).get_trials(states=(optuna.trial.TrialState.RUNNING,))
                if t.user_attrs.get("worker") == b_id]
    killed = wait_for(b_mid_trial)[0].number
    time.sleep(1.0)  # well inside the trial (eight questions at 0.8 s each)
    assert b.poll() is None, b.log.read_text()
    b.send_signal(signal.SIGKILL)
    b.wait()
    assert a.wait(timeout=600) == 0, a.log.read_text()

    study = load(postgres_url, name)
    states = optuna.trial.TrialState
    failed = [t for t in study.trials if t.state == states.FAIL]
    assert [t.number for t in failed] == [killed]  # only the trial in flight at the kill
    retries = [t for t in study.trials if t.system_attrs.get("failed_trial") == killed]
    assert len(retries) == 1 and retries[0].state in (states.COMPLETE, states.PRUNED)  # retried once, by A
    assert retries[0].user_attrs["worker"] != b_id and retries[0].params == failed[0].params
    finished = [t for t in study.trials if t.state in (states.COMPLETE, states.PRUNED)]
    assert len(finished) == max_trials == ledger(postgres_url, name)["trials"]  # the budget held across both
    assert not study.get_trials(states=(states.RUNNING, states.WAITING))
    assert len([t for t in study.trials if t.user_attrs.get("baseline")
                and t.state in (states.COMPLETE, states.PRUNED)]) == 1  # the baseline ran exactly once
    assert failed[0].user_attrs["worker"] == b_id

    # no finished trial lost or run twice: every one is in exactly one worker's log, as the study has it
    logs = [json.loads(x) for f in (tmp_path / "a" / name / "trials.jsonl", tmp_path / "b" / name / "trials.jsonl")
            if f.exists() for x in f.read_text().splitlines()]
    numbers = [r["number"] for r in logs]
    assert len(numbers) == len(set(numbers)) and set(numbers) == {t.number for t in finished}
    # A created the study, so A finalized: the same run folder as a one-machine compile
    out = tmp_path / "a" / name
    for f in ("best/program.json", "summary.json", "report.html", "manifest.json"):
        assert (out / f).exists(), f
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] + summary["pruned"] == max_trials and summary["storage"].startswith("postgresql+psycopg://")
    assert not (tmp_path / "b" / name / "best").exists()


def test_the_lm_budget_holds_across_two_workers(postgres_url, space, tmp_path):
    name = f"calls-{uuid.uuid4().hex[:8]}"
    max_calls = 80
    a = worker(tmp_path, "start", postgres_url, tmp_path / "a", name, space, calls=max_calls, delay=0.25)
    wait_for(lambda: study_exists(postgres_url, name))
    b = worker(tmp_path, "join", postgres_url, tmp_path / "b", name, space, delay=0.25)
    assert b.wait(timeout=600) == 0, b.log.read_text()
    assert a.wait(timeout=600) == 0, a.log.read_text()
    spent = ledger(postgres_url, name)
    # each worker checks the budget before every question (one LM call here): at most one call each past it
    assert max_calls <= spent["lm_calls"] <= max_calls + 2
    assert spent["cost_usd"] == pytest.approx(0.001 * spent["lm_calls"])
    study = load(postgres_url, name)
    assert sum(t.user_attrs.get("lm_calls", 0) for t in study.trials) == spent["lm_calls"]  # none counted twice
    assert {t.user_attrs.get("worker") for t in study.trials} == {f"{socket.gethostname()}:{p.pid}" for p in (a, b)}
    summary = json.loads((tmp_path / "a" / name / "summary.json").read_text())
    assert summary["lm_calls_search"] == spent["lm_calls"] and summary["stopped_by_budget"] >= 1
    assert summary["lm_calls"] > spent["lm_calls"]  # plus the final test scoring, which no budget stops


def test_a_worker_that_loses_the_database_stops_cleanly_and_keeps_what_finished(space, tmp_path):
    url, folder = start_postgres()
    try:
        name = "lost"
        a = worker(tmp_path, "start", url, tmp_path / "a", name, space, trials=40, delay=0.2, patience=4)
        wait_for(lambda: study_exists(url, name))
        wait_for(lambda: len([t for t in load(url, name).trials if t.state.is_finished()]) >= 2)
        before = {t.number: t.values for t in load(url, name).trials if t.state.is_finished()}
        subprocess.run(["bash", "scripts/postgres.sh", "stop", "--dir", str(folder)], check=True, capture_output=True,
                       cwd=Path(__file__).resolve().parents[2])
        assert a.wait(timeout=120) == 2
        out = a.log.read_text()
        assert "unreachable" in out and "gave up after 4 s" in out and f"--join {name}" in out
        assert "Traceback" not in out
        url2, _ = start_postgres_in(folder)  # the same cluster, back again
        study = load(url2, name)
        after = {t.number: t.values for t in study.trials if t.state.is_finished()}
        assert all(after.get(n) == v for n, v in before.items())  # nothing finished was lost
    finally:
        stop_postgres(folder)


def start_postgres_in(folder: Path) -> tuple[str, Path]:
    r = subprocess.run(["bash", "scripts/postgres.sh", "start", "--dir", str(folder)], capture_output=True, text=True,
                       check=True, cwd=Path(__file__).resolve().parents[2])
    return r.stdout.strip().splitlines()[-1], folder


# -- bad input: one clear message, exit status 2 ----------------------------------------------------------------
def run_cli(args, capsys):
    code = cli(args)
    return code, capsys.readouterr().err


def test_an_unreachable_database_is_named(space, tmp_path, capsys):
    url = f"postgresql+psycopg://declrag@127.0.0.1:{free_port()}/declrag"
    code, err = run_cli(["compile", "--space", str(space), "--dataset", str(GOLD), "--name", "x", "--runs",
                         str(tmp_path), "--storage", url, "-q"], capsys)
    assert code == 2 and "cannot reach the study database at " + url in err and "scripts/postgres.sh start" in err


def test_wrong_credentials_are_refused_and_the_password_is_written_nowhere(space, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PG_TEST_SECRET", "s3cret-Pw")
    url, folder = start_postgres(password_env="PG_TEST_SECRET")
    try:
        monkeypatch.setenv("PGPASSWORD", "wrong")
        code, err = run_cli(["compile", "--space", str(space), "--dataset", str(GOLD), "--name", "x", "--runs",
                             str(tmp_path), "--storage", url, "-q"], capsys)
        assert code == 2 and "refused the credentials" in err and "PGPASSWORD" in err
        monkeypatch.delenv("PGPASSWORD")
        with_pw = url.replace("declrag@", "declrag:s3cret-Pw@")
        from declrag.lm import using_lm
        from declrag.testing import ScriptedLM

        with using_lm(ScriptedLM({}, {"answer": "It is in [1]."})):
            code, err = run_cli(["compile", "--space", str(space), "--dataset", str(GOLD), "--name", "pw", "--runs",
                                 str(tmp_path), "--storage", with_pw, "--max-trials", "2", "-q"], capsys)
        assert code == 0, err
        written = [f for f in (tmp_path / "pw").rglob("*") if f.is_file() and b"s3cret-Pw" in f.read_bytes()]
        assert written == [] and "s3cret-Pw" not in err
        assert json.loads((tmp_path / "pw" / "compile.json").read_text())["storage"] == url
    finally:
        stop_postgres(folder)


def test_a_study_with_another_space_or_dataset_is_refused_naming_the_difference(postgres_url, space, tmp_path, capsys):
    from declrag.lm import using_lm
    from declrag.testing import ScriptedLM

    name = f"same-{uuid.uuid4().hex[:8]}"
    with using_lm(ScriptedLM({}, {"answer": "It is in [1]."})):
        assert run_cli(["compile", "--space", str(space), "--dataset", str(GOLD), "--name", name, "--runs",
                        str(tmp_path / "a"), "--storage", postgres_url, "--max-trials", "1", "-q"], capsys)[0] == 0
    other = tmp_path / "other.yaml"
    other.write_text(SPACE.replace("high: 3", "high: 5"))
    code, err = run_cli(["compile", "--space", str(other), "--dataset", str(GOLD), "--name", name, "--runs",
                         str(tmp_path / "b"), "--storage", postgres_url, "-q"], capsys)
    assert code == 2 and "exists with another space or dataset" in err and "space.params.k.high: 3.0 != 5.0" in err
    code, err = run_cli(["compile", "--space", str(space), "--dataset", "scifact", "--name", name, "--runs",
                         str(tmp_path / "c"), "--storage", postgres_url, "-q"], capsys)
    if code == 2 and "not found" in err:
        pytest.skip("the shared SciFact dataset is not here")
    assert code == 2 and "dataset" in err and "scifact" in err


def test_joining_a_study_that_does_not_exist_lists_the_ones_that_do(postgres_url, tmp_path, capsys):
    code, err = run_cli(["compile", "--join", "no-such-study", "--storage", postgres_url, "--runs", str(tmp_path), "-q"],
                        capsys)
    assert code == 2 and "there is no study 'no-such-study'" in err and "studies there:" in err
    code, err = run_cli(["compile", "--join", "x", "--runs", str(tmp_path), "-q"], capsys)
    assert code == 2 and "--join needs --storage" in err


def test_optuna_dashboard_reads_the_study(postgres_url, space, tmp_path, capsys):
    """`optuna-dashboard URL` (the dashboard Optuna users know) serves the study's trials."""
    import shutil
    import urllib.request

    from declrag.lm import using_lm
    from declrag.testing import ScriptedLM

    exe = shutil.which("optuna-dashboard") or str(Path(sys.executable).parent / "optuna-dashboard")
    if not Path(exe).exists():
        pytest.skip("optuna-dashboard is not installed (pip install 'declrag[postgres]')")
    name = f"dash-{uuid.uuid4().hex[:8]}"
    with using_lm(ScriptedLM({}, {"answer": "It is in [1]."})):
        assert run_cli(["compile", "--space", str(space), "--dataset", str(GOLD), "--name", name, "--runs",
                        str(tmp_path), "--storage", postgres_url, "--max-trials", "3", "-q"], capsys)[0] == 0
    port = free_port()
    proc = subprocess.Popen([exe, postgres_url, "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def studies():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as r:
                    return json.loads(r.read())
            except OSError:
                return None
        listed = wait_for(studies, timeout=60, step=0.3)
        mine = next(s for s in listed["study_summaries"] if s["study_name"] == name)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{mine['study_id']}", timeout=10) as r:
            detail = json.loads(r.read())
        assert len(detail["trials"]) == 3
    finally:
        proc.terminate()
        proc.wait(timeout=30)
