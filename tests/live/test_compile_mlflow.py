"""`declrag compile --mlflow` against a real MLflow tracking server (scripts/mlflow.sh: MLflow from PyPI, SQLite
backend, artifacts served): the study is a parent run, every trial a child run with its parameters and scores, the
best program an artifact that `declrag serve` (its `select_program`) loads back from ``runs:/RUN_ID/program``."""

from __future__ import annotations

import json
import subprocess

import pytest

from declrag.errors import DeclragError
from declrag.lm import using_lm
from declrag.optimize import Budget, CompileOptions, compile
from declrag.serve import resolve
from declrag.testing import ScriptedLM
from tests.conftest import ROOT, free_port
from tests.unit.optimize.test_compile import GOLD, SPACE

MLFLOW = ROOT / "scripts" / "mlflow.sh"


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlflow")
    r = subprocess.run(["bash", str(MLFLOW), "start", "--dir", str(folder), "--port", str(free_port())],
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    if r.returncode == 3:
        pytest.skip(f"the MLflow test needs an MLflow server, which scripts/mlflow.sh could not install here: "
                    f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'no reason given'}")
    assert r.returncode == 0, f"scripts/mlflow.sh start failed ({r.returncode}):\n{r.stderr[-3000:]}"
    yield r.stdout.split()[-1]
    subprocess.run(["bash", str(MLFLOW), "stop", "--dir", str(folder), "--clean"], capture_output=True, timeout=60)


def test_a_compile_is_a_parent_run_with_a_child_run_per_trial_and_its_program(mlflow_uri, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    space = tmp_path / "space.yaml"
    space.write_text(SPACE.replace("prompt_optimizer: {name: bootstrap, max_demos: 1, max_examples: 4}",
                                   "prompt_optimizer: {name: none}"))
    lm = ScriptedLM({"passage number in brackets": {"answer": "Paris [1]"}}, {"answer": "It is in [1]."})
    with using_lm(lm):
        s = compile(CompileOptions(space, str(GOLD), "tracked", tmp_path / "runs", Budget(max_trials=3),
                                   progress=False, mlflow=mlflow_uri, mlflow_experiment="declrag-test"))
    assert s.mlflow and s.mlflow["uri"] == mlflow_uri
    client = MlflowClient(tracking_uri=mlflow_uri)
    parent = client.get_run(s.mlflow["run_id"])
    assert parent.info.status == "FINISHED" and parent.data.tags["declrag.study"] == "tracked"
    assert parent.data.params["dataset"] == str(GOLD) and parent.data.params["budget.max_trials"] == "3"
    assert parent.data.metrics["best.test.objective"] == pytest.approx(s.best["test"]["objective"])
    assert parent.data.metrics["baseline.dev.objective"] == pytest.approx(s.baseline["dev"]["objective"])
    experiment = client.get_experiment_by_name("declrag-test").experiment_id
    children = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    lines = [json.loads(x) for x in (s.folder / "trials.jsonl").read_text().splitlines()]
    assert len(children) == len(lines) == 3
    by_name = {c.info.run_name: c for c in children}
    for rec in lines:
        child = by_name[f"trial {rec['number']}"]
        assert child.data.tags["declrag.state"] == rec["state"]
        assert {k: child.data.params[k] for k in rec["params"]} == {k: str(v) for k, v in rec["params"].items()}
        if rec["state"] == "complete":
            assert child.info.status == "FINISHED"
            assert child.data.metrics["objective"] == pytest.approx(rec["metrics"]["objective"])
        assert child.data.metrics["lm_calls"] == rec["lm_calls"]
    shipped = {a.path for a in client.list_artifacts(parent.info.run_id, "program")}
    assert {"program/program.json", "program/dspy_state.json"} <= shipped
    assert "report.html" in {a.path for a in client.list_artifacts(parent.info.run_id)}

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    choice = resolve(s.mlflow["program"])  # what `declrag serve runs:/RUN_ID/program` runs
    loaded = choice.load()
    assert json.loads((s.folder / "best" / "program.json").read_text())["config"] == \
        loaded.config.model_dump(mode="json")
    with using_lm(lm):
        assert loaded(question="What is the capital of France?").answer


def test_an_unreachable_tracking_server_is_one_clear_error_before_the_search(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    with pytest.raises(DeclragError, match="MLflow at http://127.0.0.1:9") as e:
        compile(CompileOptions(space, str(GOLD), "x", tmp_path / "runs", Budget(max_trials=1), progress=False,
                               mlflow="http://127.0.0.1:9"))
    assert "tracking server" in str(e.value)
    assert not (tmp_path / "runs" / "x" / "trials.jsonl").exists()  # no trial ran
