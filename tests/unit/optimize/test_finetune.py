"""Compile's retriever stage: fine-tuning the embedding model on the train split (real all-MiniLM-L6-v2, a few
steps on the tiny golden set), the artifact that carries the tuned model, and the split that compile cuts when
the declared source split is missing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from declrag.config import IngestConfig, ProgramConfig
from declrag.embed.embedder import folder_sha256
from declrag.errors import DeclragError
from declrag.golden import load_golden
from declrag.ingest.corpus import corpus_store
from declrag.optimize._budget import Budget
from declrag.optimize._finetune import finetune_model, training_rows
from declrag.optimize import CompileOptions, compile
from declrag.optimize._space import Space, read_space
from declrag.optimize._splits import split_examples, split_note
from declrag.pipeline.program import RAGProgram, load

GOLD = Path(__file__).parents[2] / "data" / "tiny" / "gold.jsonl"


@pytest.fixture(scope="module")
def golden():
    return load_golden(str(GOLD))


@pytest.fixture(scope="module")
def base(golden, minilm, tmp_path_factory):
    """The default program over the tiny corpus, embedded with the base model."""
    store, _ = corpus_store(golden.documents, IngestConfig(), "tiny", embedder=minilm, progress=False,
                            home=tmp_path_factory.mktemp("indexes"))
    return RAGProgram(ProgramConfig(), store=store, embedder=minilm)


@pytest.fixture(scope="module")
def tuned(base, golden, minilm, tmp_path_factory):
    rows, counts = training_rows(base, golden, golden.split("all"), hard_negatives=1)
    out = tmp_path_factory.mktemp("tuned") / "embedder"
    info = finetune_model(minilm.folder, rows, out, epochs=1, learning_rate=1e-4, batch_size=4, max_steps=3,
                          max_seconds=None, seed=7)
    return rows, counts, out, info


def weights(folder):
    from safetensors.numpy import load_file

    return load_file(str(Path(folder) / "model.safetensors"))


@pytest.mark.slow
def test_training_rows_pair_each_question_with_its_gold_passage_and_a_mined_negative(tuned, golden):
    rows, counts, _, _ = tuned
    assert counts["questions"] == len(rows) == len([e for e in golden.split("all") if e.gold])
    texts = {d.id: d.text for d in golden.documents}
    by_q = {e.question: e for e in golden.split("all")}
    for r in rows:
        gold = set(by_q[r["anchor"]].gold)
        assert any(texts[g] in r["positive"] or r["positive"] in texts[g] for g in gold)
        assert not any(texts[g] in r["negative_1"] or r["negative_1"] in texts[g] for g in gold)


@pytest.mark.slow
def test_a_few_steps_change_the_weights_are_saved_as_safetensors_and_are_deterministic(tuned, minilm, tmp_path):
    rows, _, out, info = tuned
    assert info["steps"] == 3 and info["stopped_by"] == "step budget (3 steps)" and info["loss_first"] is not None
    assert (out / "model.safetensors").is_file() and not list(out.rglob("*.bin")) and not list(out.rglob("*.pt"))
    before, after = weights(minilm.folder), weights(out)
    assert set(after) <= set(before)  # (a newer transformers no longer saves the position_ids buffer)
    assert sum(not np.array_equal(before[k], after[k]) for k in after) > len(after) // 2  # trained, not copied
    assert info["sha256"] == folder_sha256(out)
    again = finetune_model(minilm.folder, rows, tmp_path / "again", epochs=1, learning_rate=1e-4, batch_size=4,
                           max_steps=3, max_seconds=None, seed=7)
    assert again["sha256"] == info["sha256"]  # the same seed, the same model, bit for bit


@pytest.mark.slow
def test_mini_batches_keep_the_batch_and_its_loss(tuned, minilm, tmp_path):
    """The cached loss embeds 2 texts per forward pass but scores the batch of 4 as the plain loss does: the
    first step's loss (before any update; only the dropout masks differ) is the plain loss's."""
    rows, _, _, plain = tuned
    assert plain["loss"] == "MultipleNegativesRankingLoss" and plain["mini_batch_size"] is None  # 8 >= the batch
    info = finetune_model(minilm.folder, rows, tmp_path / "cached", epochs=1, learning_rate=1e-4, batch_size=4,
                          max_steps=3, max_seconds=None, seed=7, mini_batch_size=2)
    assert info["loss"] == "CachedMultipleNegativesRankingLoss" and info["mini_batch_size"] == 2
    assert info["batch_size"] == 4 and info["steps"] == 3
    assert info["loss_first"] == pytest.approx(plain["loss_first"], abs=0.15)
    again = finetune_model(minilm.folder, rows, tmp_path / "again", epochs=1, learning_rate=1e-4, batch_size=4,
                           max_steps=3, max_seconds=None, seed=7, mini_batch_size=2)
    assert again["sha256"] == info["sha256"]  # deterministic too


@pytest.mark.slow
def test_the_artifact_carries_the_tuned_model_and_the_loaded_program_embeds_with_it(tuned, golden, base, tmp_path):
    from sentence_transformers import SentenceTransformer

    _, _, out, info = tuned
    cfg = ProgramConfig(ingest=IngestConfig(embedder={"model": str(out), "weights": info["sha256"]}))
    store, _ = corpus_store(golden.documents, cfg.ingest, "tiny", progress=False, home=tmp_path / "indexes")
    assert store.uri != base.store.uri  # a new index: the address holds the model's hash
    RAGProgram(cfg, store=store).save(tmp_path / "best")
    saved = json.loads((tmp_path / "best" / "program.json").read_text())
    assert saved["config"]["ingest"]["embedder"] == {**saved["config"]["ingest"]["embedder"], "model": "embedder",
                                                      "weights": info["sha256"]}
    assert folder_sha256(tmp_path / "best" / "embedder") == info["sha256"]

    prog = load(tmp_path / "best")
    q = "Where is the Colosseum?"
    expected = SentenceTransformer(str(out), device="cpu").encode([q], normalize_embeddings=True)[0]
    assert float(prog.embedder.embed_query(q) @ expected) >= 0.9999  # ONNX Runtime (the default): torch's to rounding
    assert not np.allclose(base.embedder.embed_query(q), expected, atol=1e-4)
    assert prog.retrieve_only(q)[0].chunk.doc_id == "rome"  # its index and queries use the tuned model
    with pytest.raises(DeclragError, match="other ingest settings"):
        load(tmp_path / "best", store=base.store.uri)  # a store embedded with the base model is refused
    (tmp_path / "best" / "embedder" / "config.json").write_text("{}")
    with pytest.raises(DeclragError, match="do not match the hash"):
        load(tmp_path / "best")


FT_SPACE = """
name: tiny-finetune
objective: {metrics: {ndcg@10: 1.0}}
split: {fractions: {train: 0.5, dev: 0.25, test: 0.25}, seed: 3}
params:
  alpha: {path: retrieve.alpha, type: float, low: 0.0, high: 1.0, step: 0.5}
finetune: {enabled: true, learning_rate: 1.0e-12, batch_size: 4, max_steps: 1}
"""


@pytest.mark.slow
def test_a_tuned_model_that_does_not_improve_dev_is_not_kept(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(FT_SPACE)
    s = compile(CompileOptions(space, str(GOLD), "ft", tmp_path / "runs", Budget(max_trials=2), progress=False))
    ft = s.finetune
    assert ft["enabled"] and ft["training"]["steps"] == 1 and ft["pairs"]["questions"] == s.summary["splits"]["train"]
    assert ft["kept"] == "base" and not ft["dev"]["gain"]["significant"]
    assert {"base", "tuned"} <= set(ft["dev"]) and {"base", "tuned", "gain"} <= set(ft["test"])
    summary = json.loads((tmp_path / "runs" / "ft" / "summary.json").read_text())
    assert "ndcg@10" in summary["best"]["test"] and summary["finetune"]["kept"] == "base"
    assert not (tmp_path / "runs" / "ft" / "best" / "embedder").exists()
    stages = summary["memory"]["stages"]  # the stage's peak RSS, and each of its parts'
    assert {"finetune", "finetune.mining", "finetune.training", "finetune.reembed", "finetune.scoring"} <= set(stages)
    assert set(ft["memory"]) == {"mining", "training", "reembed", "scoring"}
    if summary["memory"]["method"] != "none":
        assert stages["finetune"]["peak_mb"] == max(stages[k]["peak_mb"] for k in stages if k.startswith("finetune"))
    assert load(tmp_path / "runs" / "ft" / "best").config.ingest.embedder.weights is None


def test_a_set_without_the_declared_source_split_is_cut_into_disjoint_splits(golden):
    sp = read_space("retrieval-finetune")  # source: train, test_split: test; the tiny set has only "all"
    splits = split_examples(golden, sp)
    ids = {k: {e.id for e in v} for k, v in splits.items()}
    assert set(ids) == {"train", "dev", "test"} and all(ids.values())
    assert not (ids["train"] & ids["dev"] or ids["train"] & ids["test"] or ids["dev"] & ids["test"])
    assert sum(map(len, ids.values())) == len(golden.split("all"))
    assert splits == split_examples(golden, sp)  # seeded
    note = split_note(golden, sp, splits)
    assert note and "no split 'train'" in note and f"test {len(ids['test'])}" in note
    plain = Space.model_validate({"name": "x", "params": {}, "split": {"source": "all"}})
    assert split_note(golden, plain, split_examples(golden, plain)) is None


def test_finetune_settings_are_checked():
    with pytest.raises(ValueError):
        Space.model_validate({"name": "x", "params": {}, "finetune": {"enabled": True, "batch_size": 1}})
    assert read_space("default").finetune.enabled is False and read_space("retrieval-finetune").finetune.enabled


def test_a_set_without_gold_passages_skips_the_stage_and_says_why():
    from types import SimpleNamespace

    from declrag.golden import Example
    from declrag.optimize._finetune import finetune_stage

    space = Space.model_validate({"name": "x", "params": {}, "finetune": {"enabled": True}})
    prog = SimpleNamespace(config=ProgramConfig())
    no_gold = [Example(id=f"q{i}", question=f"question {i}?", answers=("a",)) for i in range(4)]
    for train, why in ((no_gold, "no gold passages"), ([], "the train split is empty")):
        comp = SimpleNamespace(space=space, splits={"train": train, "dev": no_gold, "test": no_gold})
        kept, info = finetune_stage(comp, prog, Path("unused"), progress=False)
        assert kept is prog and why in info["skipped"] and "training" not in info


@pytest.mark.slow
def test_the_shipped_space_runs_on_a_set_without_its_source_split(tmp_path, caplog):
    """As a new user would: a set with one split ("all"), the shipped space asking for "train" and "test"."""
    import logging

    with caplog.at_level(logging.WARNING):
        s = compile(CompileOptions("retrieval-finetune", str(GOLD), "shipped", tmp_path / "runs",
                                   Budget(max_trials=2), progress=False))
    assert "no split 'train'" in s.summary["split_note"] and "no split 'train'" in caplog.text
    assert set(s.summary["splits"]) == {"train", "dev", "test"} and s.finetune["training"]["steps"] == 40
    assert s.finetune["kept"] in ("base", "tuned") and "ndcg@10" in s.best["test"]
