"""`declrag bench synth`: per-generator rankings of configurations, and Kendall's tau with its interval."""

from __future__ import annotations

import json

import pytest
from tests.conftest import shared


@pytest.mark.slow
def test_bench_synth_ranks_configurations_per_generator_over_passages(tmp_path, minilm):
    """Real questions with answers (no offsets) about three long articles: the bench scores them over the passages
    holding their answers, makes a set per generator (the inverse cloze's over its own copy) and reports tau and
    cost per generator."""
    from declrag_bench.synth import print_report, run
    from rich.console import Console

    data = json.loads(shared("squad-v1.1", "dev-v1.1.json").read_text())
    arts = data["data"][:3]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(
        {"_id": a["title"], "text": "\n\n".join(p["context"] for p in a["paragraphs"])}) + "\n" for a in arts))
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(
        {"id": q["id"], "question": q["question"], "answers": [x["text"] for x in q["answers"]], "gold": [a["title"]]})
        + "\n" for a in arts for p in a["paragraphs"] for q in p["qas"][:1]))
    (tmp_path / "dataset.yaml").write_text("name: three-articles\nformat: jsonl\npath: .\ncorpus: corpus.jsonl\n"
                                           "splits: {test: test.jsonl}\n")
    r = run(str(tmp_path), ["ict", "keywords"], n=40, real_limit=60, progress=False, arms=())
    assert r["real_units"].get("span", 0) > r["real_units"].get("document", 0)  # answers located: passages
    assert [c["config"] for c in r["configs"]][0] == "keyword @256" and len(r["configs"]) == 18
    for name in ("ict", "keywords"):
        g = r["generators"][name]
        assert g["questions"] > 20 and g["units"] == {"span": g["questions"]}
        assert -1 <= g["kendall_tau"]["judged_gold"]["tau"] <= 1 and g["lm_calls"] == 0 and g["s_per_question"] > 0
        assert all(0 <= c[name] <= 1 for c in r["configs"])
    console = Console(record=True, width=250)
    print_report(r, console)
    text = console.export_text()
    assert "per generator" in text and "ict" in text and "keywords" in text


def test_kendall_tau_and_its_interval_follow_the_orderings():
    import numpy as np
    from declrag_bench.synth import configs, tau_with_interval

    assert len(configs()) == 18 and sum(bool(c["rerank"]) for c in configs()) == 2
    rng = np.random.default_rng(0)
    real = np.linspace(0.2, 0.8, 18)[:, None] + rng.normal(0, 0.05, (18, 200))
    same = tau_with_interval(real + rng.normal(0, 0.05, (18, 200)), real, rounds=200)
    reversed_ = tau_with_interval(real[::-1] + rng.normal(0, 0.05, (18, 200)), real, rounds=200)
    assert same["tau"] > 0.8 and same["ci95"][0] > 0.5 and same["ci95"][0] <= same["tau"] <= same["ci95"][1]
    assert reversed_["tau"] < -0.8
