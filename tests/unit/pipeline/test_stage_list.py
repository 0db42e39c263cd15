"""The program is its stage list (`declrag.pipeline.stage_list.STAGES`): a new stage is one file and one entry in the
list, and the program, its search, compile's space and the artifact all know it with no other file touched."""

from __future__ import annotations

import importlib
import json
import sys

import pytest
from dspy.utils.dummies import DummyLM

from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.lm import using_lm
from declrag.pipeline import stage_list
from declrag.lm.prompts._adapters import PlainTextAdapter
from declrag.pipeline.program import RAGProgram, load
from declrag.pipeline.stages import PipelineStage
from declrag.testing import HashEmbedder

from tests.conftest import filled_store

Q = "What is the capital of Italy?"

# the one file: a stage that drops the passages whose retrieval score is under a threshold, with its own settings
TOY = '''
from typing import Any

from pydantic import Field

from declrag.config import Strict, register_section
from declrag.pipeline.stages import PipelineStage, State


class DropConfig(Strict):
    min_score: float = Field(0.0, ge=0.0, le=1.0)


register_section("drop", DropConfig)


class DropBelow(PipelineStage):
    """Drops the passages whose score is under ``drop.min_score``."""

    name, phase, section = "drop", "passages", "drop"

    def __init__(self, cfg: DropConfig):
        super().__init__()
        self.cfg = cfg

    def run(self, state: State, span: Any) -> None:
        state.passages = [h for h in state.passages if h.score >= self.cfg.min_score]
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy stage's module, written as a file and imported, and its one entry in the stage list (after select);
    the registries put back afterwards."""
    from declrag.config import _program

    monkeypatch.setattr(_program, "SECTIONS", dict(_program.SECTIONS))  # its section registered into a copy
    (tmp_path / "toy_drop_stage.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_drop_stage")
    at = [k.name for k in stage_list.STAGES].index("select") + 1
    monkeypatch.setattr(stage_list, "STAGES", [*stage_list.STAGES[:at], module.DropBelow, *stage_list.STAGES[at:]])
    yield module
    sys.modules.pop("toy_drop_stage", None)


def _scores(tmp_path) -> tuple[object, list[float]]:
    store = filled_store(tmp_path / "store")
    plain = RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder())
    return store, sorted(h.score for h in plain.search(Q))


def test_a_stage_written_in_one_file_and_listed_once_runs_in_the_program_and_its_search(toy, tmp_path):
    store, scores = _scores(tmp_path)
    cut = (scores[1] + scores[2]) / 2  # two of the five passages are under it
    prog = RAGProgram(ProgramConfig.model_validate({"drop": {"min_score": cut}}), store=store, embedder=HashEmbedder())
    assert [k.name for k in prog.kinds][-4:] == ["select", "drop", "generate", "judge"]
    found = prog.search(Q)
    assert len(found) == 3 and all(h.score >= cut for h in found)
    with using_lm(DummyLM([{"answer": "Rome [1]."}], adapter=PlainTextAdapter())):
        a = prog(question=Q)
    assert len(a.passages) == 3 and all(h.score >= cut for h in a.passages)
    assert "drop" in a.latency_ms and a.stages["drop"] == {"min_score": cut}
    assert prog.stage("drop").cfg.min_score == cut


def test_compiles_space_and_the_artifact_know_the_new_stage(toy, tmp_path, monkeypatch):
    from declrag.optimize._space import apply, read_space

    store, scores = _scores(tmp_path)
    space = tmp_path / "space.yaml"
    space.write_text("name: toy\nobjective: {metrics: {token_match: 1.0}}\nparams:\n"
                     "  drop: {path: drop.min_score, type: float, low: 0.0, high: 1.0, step: 0.25}\n")
    s = read_space(space)
    assert s.baseline_values() == {"drop": 0.0}  # the stage's own default
    config = apply(s.base, {"drop": 0.75}, s.params)
    assert config.section("drop").min_score == 0.75
    prog = RAGProgram(config, store=store, embedder=HashEmbedder())
    folder = prog.save(tmp_path / "artifact")
    meta = json.loads((folder / "program.json").read_text())
    assert meta["config"]["drop"] == {"min_score": 0.75} and "drop" in meta["stages"]
    monkeypatch.setattr(stage_list, "STAGES", [k for k in stage_list.STAGES if k.name != "drop"])  # listed no more
    again = load(folder, store=store, embedder=HashEmbedder())
    assert [k.name for k in again.kinds] == meta["stages"]  # the artifact's stages, not today's list
    assert again.search(Q) == prog.search(Q) and all(h.score >= 0.75 for h in again.search(Q))


def test_an_artifact_whose_stage_is_not_known_is_one_clear_error(tmp_path):
    store = filled_store(tmp_path / "store")
    folder = RAGProgram(ProgramConfig(), store=store, embedder=HashEmbedder()).save(tmp_path / "a")
    meta = json.loads((folder / "program.json").read_text())
    meta["stages"].insert(5, "compress")
    (folder / "program.json").write_text(json.dumps(meta))
    with pytest.raises(DeclragError) as e:
        load(folder, store=store, embedder=HashEmbedder())
    assert "no stage named 'compress'" in e.value.message and "import the module" in e.value.hint


def test_stages_out_of_phase_order_or_named_twice_are_refused():
    kinds = list(stage_list.STAGES)
    with pytest.raises(ValueError, match="out of phase order"):
        stage_list.resolved([kinds[-1], *kinds[:-1]])
    with pytest.raises(ValueError, match="listed twice"):
        stage_list.resolved([*kinds, kinds[-1]])
    with pytest.raises(TypeError, match="phase must be one of"):
        type("Nowhere", (PipelineStage,), {"name": "nowhere", "phase": "later"})


def test_what_the_program_needs_is_derived_from_its_stages():
    assert set(stage_list.needed_specs()) == {"condense", "rewrite", "multi_query", "hyde", "decompose", "step_back",
                                             "rerank", "generate", "judge"}
    assert stage_list.variant_specs()["judge.regenerate_variant"] == ("generate",)
    on = ProgramConfig.model_validate({"rewrite": {"mode": "hyde"}, "rerank": {"mode": "llm", "candidates": 10},
                                       "generate": {"mode": "lm"}, "judge": {"mode": "llm"},
                                       "history": {"query": "condense"}})
    assert stage_list.lm_stages(on) == ["condense", "rewrite", "rerank", "generate", "judge"]
    assert stage_list.lm_stages(ProgramConfig()) == []  # the default answers extractively, with no LM


def test_a_compile_searches_the_new_stages_setting_and_ships_it(toy, tmp_path):
    from declrag.optimize import Budget, CompileOptions, compile

    from tests.unit.optimize.test_compile import GOLD, answers_by_prompt

    space = tmp_path / "space.yaml"
    space.write_text("name: toy\nobjective: {metrics: {token_match: 1.0}}\nparams:\n"
                     "  drop: {path: drop.min_score, type: float, low: 0.0, high: 1.0, step: 0.5}\n")
    with using_lm(answers_by_prompt()):
        compile(CompileOptions(space, str(GOLD), "toy", tmp_path / "runs", Budget(max_trials=3), progress=False))
    run = tmp_path / "runs" / "toy"
    trials = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
    assert trials[0]["params"] == {"drop": 0.0} and {t["params"]["drop"] for t in trials} > {0.0}
    best = json.loads((run / "best" / "program.json").read_text())
    assert "drop" in best["stages"] and "min_score" in best["config"]["drop"]


def test_a_copy_with_other_retrieve_settings_builds_again_only_the_stages_that_read_them(tmp_path):
    """`RAGProgram.with_settings` (a search with its own k, exploration's neighbours): the stages built from the changed
    sections are new, the others (the generate stage and its learned demos, a loaded cross-encoder) shared."""
    store = filled_store(tmp_path / "store")
    prog = RAGProgram(ProgramConfig.model_validate({"retrieve": {"abstain_below": 0.2}}), store=store,
                      embedder=HashEmbedder())
    other = prog.with_settings({"retrieve.k": 2})
    assert other.retrieve is not prog.retrieve and other.select is not prog.select
    assert other.generate is prog.generate and other.rerank is prog.rerank and other.judge is prog.judge
    assert len(other.search(Q)) == 2 and len(prog.search(Q)) == 5
    again = prog.with_settings({"rerank.mode": "bm25", "rerank.candidates": 10})
    assert again.rerank is not prog.rerank and again.retrieve.pool == 10  # the rerank's candidates size the pool
