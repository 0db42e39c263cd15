"""`declrag bench compile`: the grid and the search on cold caches, each stage's peak memory."""

from __future__ import annotations

import pytest
from tests.unit.optimize.test_compile import GOLD, SPACE, answers_by_prompt
from tests.unit.optimize.test_finetune import FT_SPACE

from declrag.lm import using_lm


def test_bench_compile_runs_the_grid_and_the_search_on_cold_caches(tmp_path):
    from declrag_bench.compile import run as bench_compile

    f = tmp_path / "bench.yaml"
    f.write_text(SPACE.split("params:")[0] + "base: {retrieve: {k: 2}}\nparams:\n"
                 "  k: {path: retrieve.k, type: categorical, choices: [1, 2]}\n"
                 "  prompt: {path: generate.variant, type: categorical, choices: [plain, terse]}\n")
    with using_lm(answers_by_prompt()):
        r = bench_compile(str(GOLD), f, share=0.5, progress=False)
    # (a scripted LM is not metered, so LM-call counts are only measured in real runs)
    assert r["programs"] == 4 and len(r["all_grid_scores"]) == 4 and r["dev_questions"] >= 1
    assert r["search"]["trials"] >= r["search"]["complete"] >= 1 and r["search"]["best_params"]
    assert r["search"]["best_dev"] <= r["grid"]["best_dev"] and r["search_reaches"] == round(
        r["search"]["best_dev"] / r["grid"]["best_dev"], 4)


@pytest.mark.slow
def test_bench_compile_reports_each_stages_peak_memory_with_the_finetune_stage(tmp_path):
    from declrag_bench.compile import print_report, run
    from rich.console import Console

    space = tmp_path / "space.yaml"
    space.write_text(FT_SPACE)
    r = run(str(GOLD), space, progress=False)
    assert r["finetune"]["training"]["steps"] == 1 and r["finetune"]["kept"] in ("base", "tuned")
    stages = r["memory"]["stages"]
    assert {"setup", "indexes", "grid", "search", "finetune", "finetune.training", "finetune.reembed"} <= set(stages)
    console = Console(record=True, width=160)
    print_report(r, console)
    text = console.export_text()
    assert "peak resident memory per stage" in text and "finetune.training" in text and "fine-tune: 1 steps" in text
