"""The trial log, ``trials.jsonl`` in the run folder: one line per trial that ran (params, every metric, LM calls,
cost, seconds, state, worker), appended as each ends, so that a killed run keeps every finished trial's line.
With progress on, each line is also said in one sentence."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from tqdm.auto import tqdm

WORKER = f"{socket.gethostname()}:{os.getpid()}"  # who ran a trial (trials.jsonl)


class TrialLog:
    """``out/trials.jsonl``, written by every thread of this process (one line at a time)."""

    def __init__(self, out: Path, progress: bool = True):
        self.path, self.progress = Path(out) / "trials.jsonl", progress
        self._lock = threading.Lock()
        self.sinks: list[Callable[[dict[str, Any]], None]] = []  # told each line too (`mlflow_runs.MlflowRuns.trial`)

    def write(self, trial: optuna.Trial, values: dict[str, Any], result: dict[str, Any], state: str, secs: float,
              study: dict[str, Any]) -> None:
        """The line of ``trial`` (its sampled ``values``, its metrics ``result``, how it ended); ``study``: the
        ledger's state (`declrag.optimize._budget.Account.state`) for the sentence."""
        rec = {"number": trial.number, "state": state, "params": values,
               "metrics": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in result.items()},
               "lm_calls": trial.user_attrs.get("lm_calls"), "cost_usd": trial.user_attrs.get("cost_usd"),
               "seconds": round(secs, 2), "worker": WORKER}
        if "retry_of" in trial.user_attrs:
            rec["retry_of"] = trial.user_attrs["retry_of"]
        with self._lock, self.path.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        for sink in self.sinks:
            sink(rec)
        if self.progress:
            tqdm.write(_sentence(rec, result, study, secs))

    def mine(self) -> int:
        """How many of the log's trials this process ran."""
        if not self.path.exists():
            return 0
        return len([r for r in map(json.loads, self.path.read_text().splitlines()) if r.get("worker") == WORKER])


def _sentence(rec: dict[str, Any], result: dict[str, Any], study: dict[str, Any], secs: float) -> str:
    obj = result.get("objective")
    retrieval = [(k.split(":", 1)[1], v) for k, v in result.items() if k.startswith("retrieval:") and v is not None]
    score = f"objective {obj:.4f}" if obj is not None else \
        f"retrieval {retrieval[0][0]} {retrieval[0][1]:.4f}" if retrieval else "no score"  # pruned on retrieval
    budget = f"/{study['max_lm_calls']}" if study["max_lm_calls"] else ""
    retry = f" (retry of {rec['retry_of']})" if "retry_of" in rec else ""
    return (f"trial {rec['number']}{retry} {rec['state']}: {score}, {rec['lm_calls'] or 0} LM calls "
            f"(study {study['lm_calls']}{budget}), {secs:.0f} s")
