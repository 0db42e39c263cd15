"""The server process of `declrag bench serve` (`python -m declrag_bench.served`): one scenario's program under
uvicorn on loopback, in one process or, with ``--processes``, in several as `declrag serve --processes` runs them."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from .serve import SCENARIOS, SERVER_TIMEOUT_S, _program


def _serve_main(argv: list[str] | None = None) -> None:
    """The benchmark's server process: one scenario's program under uvicorn on loopback (``--processes``: in that
    many server processes, as `declrag serve --processes` runs them)."""
    import uvicorn

    from declrag.serve import ServeSettings
    from declrag.serve._processes import run as run_processes
    from declrag.usage import RecordSettings

    p = argparse.ArgumentParser()
    p.add_argument("--scenario", required=True, choices=SCENARIOS)
    p.add_argument("--store", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--max-in-flight", type=int, default=16)
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--lm-cache", required=True)
    p.add_argument("--embed-backend", default=None)
    p.add_argument("--record", default=None, help="a usage store to record to (default: none)")
    a = p.parse_args(argv)
    settings = ServeSettings(port=a.port, max_in_flight=a.max_in_flight, workers=a.workers,
                             request_timeout_s=SERVER_TIMEOUT_S, processes=a.processes,
                             record=RecordSettings(target=a.record) if a.record else None)
    spec = {"scenario": a.scenario, "store": a.store, "lm_cache": a.lm_cache, "embed": a.embed_backend}
    if a.processes > 1:
        run_processes(spec, settings, a.processes, factory="declrag_bench.served:_process_app", log_level="warning")
        return
    uvicorn.run(_bench_app(spec, settings), host="127.0.0.1", port=a.port, log_level="warning", access_log=False)


def _process_app() -> Any:
    """One server process of the benchmark's ``--processes`` server."""
    from declrag.serve import ServeSettings
    from declrag.serve._processes import spec

    s = spec()
    return _bench_app(s, ServeSettings.model_validate(s["settings"]))


def _bench_app(spec: dict[str, Any], settings: Any) -> Any:
    from declrag.lm import use_lm_cache
    from declrag.runtime import tracing
    from declrag.serve import create_app

    tracing.configure()  # on where the bench's tracing arm set OTEL_EXPORTER_OTLP_ENDPOINT
    use_lm_cache(Path(spec["lm_cache"]))
    scenario, holder = spec["scenario"], {}

    embed = None
    if spec.get("embed"):  # an empty embedding cache of this server process's own
        Path(spec["lm_cache"]).mkdir(parents=True, exist_ok=True)
        embed = (spec["embed"], Path(tempfile.mkdtemp(prefix="embeddings-", dir=spec["lm_cache"])))

    def load():
        prog, lm = _program(scenario, spec["store"], embed)
        holder["lm"] = lm
        return prog

    return create_app(load, f"bench-{scenario}", settings=settings,
                      lm_override=(lambda: holder["lm"]()) if scenario in ("retrieval", "search") else None)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _serve_main()
