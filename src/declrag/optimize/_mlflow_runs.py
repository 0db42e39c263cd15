"""A compile in MLflow (`declrag compile --mlflow URI`, the ``mlflow`` extra): the study is a parent run (its space,
dataset and budgets as parameters; the baseline's and the best program's dev and test scores, LM calls and cost as
metrics; the best program, the report and the summary as artifacts), and each trial a child run logged as it ends
(its sampled parameters, every dev metric, LM calls, cost, seconds, and how it ended). The best program is logged
under ``program/``: ``declrag serve runs:/RUN_ID/program`` (with ``MLFLOW_TRACKING_URI`` set) serves exactly it.

It sits beside optuna-dashboard rather than in its place: the dashboard reads the Optuna study itself (live, with
its plots of the search space), while MLflow keeps compiles next to a team's other experiments and holds the
artifact. Logging goes through `mlflow.MlflowClient` with explicit run ids, so that trials ending on several threads
at once each reach their own run."""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..errors import DeclragError

log = logging.getLogger(__name__)
_STATES = {"complete": "FINISHED", "pruned": "KILLED"}  # an MLflow run's status per trial state; the rest FAILED


def _client(uri: str) -> Any:
    try:
        from mlflow import MlflowClient
    except ImportError as e:
        raise DeclragError("--mlflow needs MLflow's client (mlflow is not installed)",
                           hint="pip install 'declrag[mlflow]'") from e
    return MlflowClient(tracking_uri=uri)


class MlflowRuns:
    """The parent run of one compile and a child run per trial, in experiment ``experiment`` at ``uri``."""

    def __init__(self, uri: str, experiment: str, study: str, params: dict[str, Any]):
        self.uri, self.client, self._lock = uri, _client(uri), threading.Lock()
        try:
            if uri.startswith(("http://", "https://")):  # at once, not after MLflow's minutes of retries
                _reachable(uri)
            found = self.client.get_experiment_by_name(experiment)
            self.experiment = found.experiment_id if found else self.client.create_experiment(experiment)
            self.run_id = self.client.create_run(self.experiment, run_name=study,
                                                 tags={"declrag.study": study}).info.run_id
        except Exception as e:  # MLflow's own errors: an unreachable server, a refused request
            raise DeclragError(f"MLflow at {uri}: {str(e).splitlines()[0][:300]}",
                               hint="check that the tracking server runs and the URI is right, e.g. "
                                    "http://127.0.0.1:5000") from None
        self._log(self.run_id, params=_flat(params))

    def trial(self, rec: dict[str, Any]) -> None:
        """One trial's child run, from its `declrag.optimize._trials.TrialLog` line. A failed log call is a warning:
        the compile goes on."""
        try:
            end = int(time.time() * 1000)
            run = self.client.create_run(self.experiment, run_name=f"trial {rec['number']}",
                                         start_time=end - int(1000 * (rec.get("seconds") or 0)),
                                         tags={"mlflow.parentRunId": self.run_id, "declrag.state": rec["state"],
                                               "declrag.worker": rec.get("worker", "")})
            metrics = {**rec.get("metrics", {}), "lm_calls": rec.get("lm_calls"), "cost_usd": rec.get("cost_usd"),
                       "seconds": rec.get("seconds")}
            self._log(run.info.run_id, params=_flat(rec.get("params", {})), metrics=metrics)
            self.client.set_terminated(run.info.run_id, _STATES.get(rec["state"], "FAILED"), end_time=end)
        except Exception as e:  # the search must not stop because a tracking server hiccups
            log.warning("MLflow: trial %s was not logged: %s", rec.get("number"), str(e).splitlines()[0][:200])

    def finish(self, summary: dict[str, Any], folder: Path) -> str:
        """The compile's results and artifacts on the parent run, which ends; returns the program's artifact URI."""
        metrics: dict[str, Any] = {f"{who}.{split}.{k}": v for who in ("baseline", "best")
                                   for split in ("dev", "test") for k, v in (summary[who].get(split) or {}).items()}
        metrics |= {k: summary.get(k) for k in ("lm_calls", "cost_usd", "trials", "complete", "pruned", "wall_s")}
        metrics["gain_test"] = (summary.get("gain_test") or {}).get("diff")
        self._log(self.run_id, metrics=metrics)
        self.client.set_tag(self.run_id, "declrag.shipped", str(summary.get("shipped")))
        self.client.log_artifacts(self.run_id, str(folder / "best"), "program")
        for name in ("report.html", "summary.json"):
            if (folder / name).exists():
                self.client.log_artifact(self.run_id, str(folder / name))
        self.client.set_terminated(self.run_id, "FINISHED")
        return f"runs:/{self.run_id}/program"

    def failed(self) -> None:
        try:
            self.client.set_terminated(self.run_id, "FAILED")
        except Exception:  # already reported: the compile's own error is the one to show
            pass

    def _log(self, run_id: str, params: dict[str, str] | None = None, metrics: dict[str, Any] | None = None) -> None:
        from mlflow.entities import Metric, Param

        now = int(time.time() * 1000)
        numbers = [Metric(_name(k), float(v), now, 0) for k, v in (metrics or {}).items()
                   if isinstance(v, int | float) and not isinstance(v, bool)]
        with self._lock:
            self.client.log_batch(run_id, metrics=numbers,
                                  params=[Param(_name(k), v) for k, v in (params or {}).items()])


def _name(key: str) -> str:
    """A metric or parameter name MLflow takes (letters, digits, ``_-. :/``): ``ndcg@10`` is ``ndcg_at_10``."""
    return re.sub(r"[^\w\-. :/]", "_", key.replace("@", "_at_"))


def _reachable(uri: str) -> None:
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5).close()
    except urllib.error.HTTPError:  # it answers (a proxy's 401, an old server's 404): reachable
        pass
    except (OSError, ValueError) as e:
        raise RuntimeError(f"the tracking server does not answer ({getattr(e, 'reason', e)})") from None


def _flat(params: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested parameters as MLflow's flat ``a.b`` names and strings (at most 6,000 characters each)."""
    out: dict[str, str] = {}
    for k, v in params.items():
        if isinstance(v, dict):
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = str(v)[:6000]
    return out
