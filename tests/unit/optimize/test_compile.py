"""`declrag compile`: the declared space, the study (baseline first, pruning, budgets), the artifact and the
report, resume after SIGKILL, and clear errors on bad spaces. LMs are scripted (DummyLM-based) here; the
real runs are in the closing note and `declrag bench compile`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest

from declrag.errors import DeclragError
from declrag.lm import using_lm
from declrag.optimize import Budget, CompileOptions, compile
from declrag.optimize._space import grid, read_space, sample
from declrag.pipeline.program import load
from declrag.testing import ScriptedLM

GOLD = Path(__file__).parents[2] / "data" / "tiny" / "gold.jsonl"
SPACE = """
name: tiny
objective: {metrics: {token_match: 0.5, sia: 0.5}}
split: {fractions: {train: 0.25, dev: 0.5, test: 0.25}, seed: 3}
fidelity: {slices: [0.5, 1.0], startup_trials: 2}
params:
  k: {path: retrieve.k, type: int, low: 1, high: 3}
  alpha: {path: retrieve.alpha, type: float, low: 0.0, high: 1.0, step: 0.5}
  prompt: {path: generate.variant, type: categorical, choices: [plain, terse]}
  rerank: {path: rerank.mode, type: categorical, choices: [none, bm25]}
  rerank_candidates: {path: rerank.candidates, type: int, low: 3, high: 9, step: 3, ge: k, when: "rerank != none"}
prompt_optimizer: {name: bootstrap, max_demos: 1, max_examples: 4}
"""


def answers_by_prompt():
    # the terse prompt "answers" right for one question; everything else is wrong
    return ScriptedLM({"passage number in brackets": {"answer": "Paris [1]"}}, {"answer": "It is in [1]."})


@pytest.fixture
def space(tmp_path):
    f = tmp_path / "space.yaml"
    f.write_text(SPACE)
    return f


def test_compile_writes_the_run_folder_and_a_loadable_best_program(space, tmp_path):
    with using_lm(answers_by_prompt()):
        s = compile(CompileOptions(space, str(GOLD), "c1", tmp_path / "runs", Budget(max_trials=6), progress=False))
    out = tmp_path / "runs" / "c1"
    for f in ("compile.json", "split.json", "study.journal", "trials.jsonl", "manifest.json", "summary.json",
              "report.md", "report.html", "best/program.json", "best/dspy_state.json"):
        assert (out / f).exists(), f
    trials = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    assert trials[0]["params"] == {"k": 5, "alpha": 0.5, "prompt": "plain", "rerank": "none"}  # the naive baseline
    assert s.baseline["trial"] == 0 and s.trials == 6
    saved = json.loads((out / "summary.json").read_text())
    assert {"objective", "baseline", "best", "trials", "lm_calls", "cost_usd", "wall_s", "memory"} <= set(saved)
    mem = saved["memory"]  # each stage's own peak RSS (declrag.runtime.process_memory), in the order the stages ran
    assert list(mem["stages"]) == ["setup", "search", "selection", "prompts", "test", "report"]
    if mem["method"] != "none":
        assert all(v["peak_mb"] >= v["start_mb"] > 50 for v in mem["stages"].values())
        assert mem["peak_mb"] == max(v["peak_mb"] for v in mem["stages"].values())
    assert "## Memory" in (out / "report.md").read_text()
    assert s.best["dev"]["objective"] >= s.baseline["dev"]["objective"]
    split = json.loads((out / "split.json").read_text())
    assert not set(split["test"]) & (set(split["dev"]) | set(split["train"]))  # test is held out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "done" and {"data", "space", "split", "config"} <= set(manifest["hashes"])
    prog = load(out / "best")
    assert prog.config.retrieve.k == s.best["params"]["k"]
    assert "Gain over the naive baseline" in (out / "report.md").read_text()


def test_conditions_and_dynamic_bounds(space):
    sp = read_space(space)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(40):
        t = study.ask()
        v = sample(t, sp)
        study.tell(t, 0.0)
        if v["rerank"] == "none":
            assert "rerank_candidates" not in v
        else:
            assert v["rerank_candidates"] >= v["k"] and v["rerank_candidates"] % 3 == 0
    combos = grid(sp)
    assert len(combos) == 3 * 3 * 2 * (1 + 3)  # rerank none: 1; bm25: candidates 3, 6, 9 (all >= k)
    assert all(c.get("rerank_candidates", 99) >= c["k"] for c in combos)


@pytest.mark.parametrize("change, message", [
    (("type: int, low: 1, high: 3}", "type: integer, low: 1, high: 3}"), "params.k.type"),
    (("low: 1, high: 3", "low: 4, high: 3"), "low` <= `high"),
    (("path: retrieve.k,", "path: retrieve.kk,"), "params.k"),
    (("choices: [plain, terse]", "choices: [plain, sonnet]"), "sonnet"),
    (("ge: k,", "ge: kk,"), "refers to 'kk'"),
    (('when: "rerank != none"', 'when: "rerank is none"'), "when"),
    (("name: tiny", "name: tiny\ncolour: red"), "colour"),
    (("choices: [plain, terse]", "choices: [terse, strict]"), "naive baseline's generate.variant = 'plain'"),
    (("name: tiny", "name: tiny\nsampler: {name: annealing}"), "sampler.name"),
    (("name: tiny", "name: tiny\nsampler: {name: tpe, options: {n_startup: 3}}"), "sampler.options.n_startup"),
    (("name: tiny", "name: tiny\nsampler: {name: tpe, options: {seed: 3}}"), "seeded with split.seed"),
    (("name: tiny", "name: tiny\nsampler: {name: tpe, options: {n_startup_trials: many}}"), "tpe refused"),
    (("name: tiny", "name: tiny\nsampler: {options: {n_startup_trials: 2}}"), "not auto"),
    (("sia: 0.5}}", "sia: 0.5}, also: [cost_usd]}\nsampler: {name: cmaes}"), "cmaes optimizes one objective"),
    (("alpha: {path: retrieve.alpha, type: float, low: 0.0, high: 1.0, step: 0.5}",
      "alpha: {path: retrieve.alpha, type: float, low: 0.0, high: 1.0}"), "sampler: grid"),
])
def test_bad_spaces_name_the_file_and_key(tmp_path, change, message):
    f = tmp_path / "bad.yaml"
    if message == "sampler: grid":  # a float without a step, under the grid sampler
        change, message = (change[0], change[1]), "params.alpha: the grid sampler needs a `step`"
        f.write_text(SPACE.replace(*change) + "sampler: {name: grid}\n")
    else:
        f.write_text(SPACE.replace(*change))
    with pytest.raises(DeclragError) as e:
        read_space(f)
    assert str(f) in str(e.value) and message in str(e.value)


def test_budget_stops_cleanly_and_keeps_what_was_done(space, tmp_path):
    slow = ScriptedLM({"passage number in brackets": {"answer": "Paris [1]"}}, {"answer": "It is in [1]."}, delay=0.2)
    with using_lm(slow):  # about 1.6 s a trial: 50 trials cannot fit in 20 s, the first one does
        s = compile(CompileOptions(space, str(GOLD), "c2", tmp_path / "runs", Budget(max_trials=50, timeout_s=20),
                                   progress=False))
    assert 1 <= s.complete < 50 and s.stopped_by_budget <= 1
    with pytest.raises(DeclragError, match="already holds a compile"):
        compile(CompileOptions(space, str(GOLD), "c2", tmp_path / "runs", Budget(max_trials=1), progress=False))


def test_compile_returns_its_result_and_puts_optunas_log_level_back(tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text(SPACE.split("params:")[0] + "params:\n  k: {path: retrieve.k, type: int, low: 1, high: 3}\n"
                 "prompt_optimizer: {name: none}\n")
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.DEBUG)  # the caller's choice
    try:
        with using_lm(answers_by_prompt()):
            s = compile(CompileOptions(f, str(GOLD), "r", tmp_path / "runs", Budget(max_trials=2), progress=False))
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG  # quiet while it ran, then as it was
    finally:
        optuna.logging.set_verbosity(before)
    assert s.role == "finalizer" and s.folder == tmp_path / "runs" / "r" and s.mine is None
    assert (s.study, s.trials, s.complete + s.pruned, s.stopped_by_budget) == ("r", 2, 2, 0)
    written = json.loads((s.folder / "summary.json").read_text())
    assert {k: v for k, v in s.summary.items() if k != "report"} == written
    for name in ("trials", "lm_calls", "cost_usd", "baseline", "best", "gain_test", "shipped", "selection", "finetune",
                 "storage", "wall_s"):
        assert getattr(s, name) == written[name], name
    assert s.baseline is not None and s.baseline["trial"] == 0 and s.check_questions is None
    assert s.memory["stages"] == written["memory"]["stages"]


def test_the_command_reads_the_result_of_a_finalizer_and_of_a_worker(tmp_path, capsys, monkeypatch):
    import declrag.optimize
    from declrag.cli import main as cli
    from declrag.optimize import CompileResult

    f = tmp_path / "one.yaml"
    f.write_text(SPACE.split("params:")[0] + "params:\n  k: {path: retrieve.k, type: int, low: 1, high: 3}\n"
                 "prompt_optimizer: {name: none}\n")
    with using_lm(answers_by_prompt()):
        code = cli(["compile", "--space", str(f), "--dataset", str(GOLD), "--name", "one", "--runs",
                    str(tmp_path / "runs"), "--max-trials", "2", "-q"])
    said = capsys.readouterr().out
    assert code in (0, None) and "compile: 2 trials (" in said and "baseline (trial 0)" in said
    assert f"program: {tmp_path / 'runs' / 'one' / 'best'} report: {tmp_path / 'runs' / 'one' / 'report.html'}" \
        in " ".join(said.split())
    worker = CompileResult(role="worker", study="w", storage="postgresql+psycopg://u@h/db", folder=tmp_path / "w",
                           trials=5, complete=3, pruned=2, stopped_by_budget=0, repeats=0, wall_s=1.5,
                           memory={}, mine=4)
    monkeypatch.setattr(declrag.optimize, "compile", lambda options: worker)
    code = cli(["compile", "--join", "w", "--storage", "postgresql+psycopg://u@h/db", "-q"])
    said = " ".join(capsys.readouterr().out.split())
    assert "worker done: the study 'w' in postgresql+psycopg://u@h/db has 3 finished and 2 pruned trials (4 of " \
           "them run here, in 1.5 s)" in said


def test_a_program_proposed_again_is_not_scored_again(tmp_path, capsys):
    f = tmp_path / "two.yaml"
    f.write_text(SPACE.split("params:")[0] + "params:\n  prompt: {path: generate.variant, type: categorical, choices: [plain, terse]}\n"
                 "prompt_optimizer: {name: none}\n")
    with using_lm(answers_by_prompt()):
        s = compile(CompileOptions(f, str(GOLD), "two", tmp_path / "runs", Budget(max_trials=6, max_lm_calls=1000)))
    shown = [x for x in capsys.readouterr().out.splitlines() if x.startswith("trial ")]  # one line per trial
    assert [x.split()[1] for x in shown] == [str(n) for n in range(6)] and "LM calls (study " in shown[0]
    assert shown[0].startswith("trial 0 complete: objective 0.") and "/1000)" in shown[0]
    recs = [json.loads(x) for x in (tmp_path / "runs" / "two" / "trials.jsonl").read_text().splitlines()]
    repeats = [r for r in recs if r["state"].startswith("repeat of")]
    assert len(recs) == 6 and len(repeats) >= 3 and s.repeats == len(repeats)
    for r in repeats:
        first = next(x for x in recs if x["number"] == int(r["state"].split()[-1]))
        assert first["state"] == "complete" and first["params"] == r["params"] and first["metrics"] == r["metrics"]
        assert r["lm_calls"] == 0


def test_parallel_jobs_share_the_trial_budget_exactly(space, tmp_path):
    slow = ScriptedLM({"passage number in brackets": {"answer": "Paris [1]"}}, {"answer": "It is in [1]."}, delay=0.05)
    with using_lm(slow):  # the threads see the LM chosen here
        s = compile(CompileOptions(space, str(GOLD), "j", tmp_path / "runs", Budget(max_trials=7), jobs=2,
                                   progress=False))
    lines = [json.loads(x) for x in (tmp_path / "runs" / "j" / "trials.jsonl").read_text().splitlines()]
    assert s.complete + s.pruned == 7 == len(lines) and len({r["number"] for r in lines}) == 7
    assert s.stopped_by_budget == 0 and s.baseline["trial"] == 0


def test_resume_keeps_the_budgets_the_study_started_with(space, tmp_path):
    with using_lm(answers_by_prompt()):
        compile(CompileOptions(space, str(GOLD), "b", tmp_path / "runs", Budget(max_trials=2), progress=False))
        out = tmp_path / "runs" / "b"
        assert json.loads((out / "compile.json").read_text())["budget"]["max_trials"] == 2
        assert compile(CompileOptions(resume=out, progress=False)).trials == 2  # no budget given: still 2, nothing new
        assert compile(CompileOptions(resume=out, budget=Budget(max_trials=3), progress=False)).trials == 3  # raised


def test_a_trial_killed_in_flight_is_queued_again_once(space, tmp_path):
    from declrag.golden import load_golden
    from declrag.optimize import Objective, Workers
    from declrag.optimize._study import retry_killed
    from declrag.optimize._study import place

    workers = Workers(Objective(read_space(space), load_golden(str(GOLD)), tmp_path, progress=False), Budget())

    def open_study():
        return workers.open_study(place(tmp_path, "k"), {"data": "d"})

    study, created = open_study()
    first = study.ask()  # trial 0, the baseline, starts ... and the process dies
    assert created and first.user_attrs.get("baseline")
    study, created = open_study()  # resume: the journal's owner is gone, so what runs was cut off
    retry_killed(study)
    assert not created and study.trials[0].state == optuna.trial.TrialState.FAIL
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].user_attrs.get("baseline") and waiting[0].system_attrs["failed_trial"] == 0
    retry_killed(study)
    assert len(study.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 1  # queued once only
    again = study.ask()  # the retry starts ... and dies too: it is not queued a third time
    assert again.number == 1
    retry_killed(study)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL] * 2


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from declrag.lm import using_lm
    from declrag.optimize import Budget, CompileOptions, compile
    from declrag.testing import ScriptedLM

    lm = ScriptedLM({"passage number in brackets": {"answer": "Paris [1]"}}, {"answer": "It is in [1]."}, delay=0.15)
    with using_lm(lm):
        if sys.argv[1] == "start":
            compile(CompileOptions(sys.argv[2], sys.argv[3], "k", sys.argv[4], Budget(max_trials=int(sys.argv[5])),
                                   progress=False))
        else:
            compile(CompileOptions(resume=sys.argv[2], budget=Budget(max_trials=int(sys.argv[3])), progress=False))
""")


def test_a_killed_compile_resumes_without_losing_or_rerunning_trials(space, tmp_path):
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, str(script), "start", str(space), str(GOLD), str(runs), "40"])
    trials = runs / "k" / "trials.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (trials.exists() and len(trials.read_text().splitlines()) >= 3):
        time.sleep(0.1)
    time.sleep(0.5)  # well into the next trial
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = [json.loads(x) for x in trials.read_text().splitlines()]
    finished = {r["number"]: r for r in before}
    assert len(finished) >= 3
    subprocess.run([sys.executable, str(script), "resume", str(runs / "k"), str(len(finished) + 3)], check=True,
                   timeout=600)
    after = [json.loads(x) for x in trials.read_text().splitlines()]
    numbers = [r["number"] for r in after]
    assert len(numbers) == len(set(numbers))  # no trial ran twice
    for n, r in finished.items():  # every finished trial is still there, unchanged
        assert next(a for a in after if a["number"] == n) == r
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    study = optuna.load_study(study_name="k", storage=JournalStorage(JournalFileBackend(str(runs / "k" / "study.journal"))))
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.FAIL) == 1  # the trial in flight at the kill
    assert len([s for s in states if s.is_finished() and s != optuna.trial.TrialState.FAIL]) == len(finished) + 3
    assert (runs / "k" / "best" / "program.json").exists()


def test_importances_count_each_program_once():
    from declrag.optimize._report import importances

    def study(repeats: int) -> optuna.Study:
        st = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=1))
        for _ in range(12):  # the objective follows x; y is noise
            t = st.ask({"x": optuna.distributions.FloatDistribution(0, 1), "y": optuna.distributions.FloatDistribution(0, 1)})
            st.tell(t, t.params["x"] + 0.01 * t.params["y"])
        first = st.trials[0]
        for _ in range(repeats):  # the sampler proposed trial 0's program again: same params and score
            st.add_trial(optuna.trial.create_trial(params=first.params, distributions=first.distributions,
                                                   value=first.value, user_attrs={"repeat_of": 0}))
        return st

    once = importances(study(0))
    assert set(once) == {"x", "y"} and once["x"] > once["y"]
    assert importances(study(20)) == once


def test_a_good_retrieval_score_does_not_shield_a_weak_slice():
    from declrag.optimize._budget import StepMedianPruner

    st = optuna.create_study(direction="maximize", pruner=StepMedianPruner(n_startup_trials=2))
    st.add_trial(optuna.trial.create_trial(value=0.3))  # a repeat: complete, no intermediate values
    for retrieval, first_slice in ((0.90, 0.40), (0.80, 0.50)):
        st.add_trial(optuna.trial.create_trial(value=first_slice, intermediate_values={0: retrieval, 1: first_slice}))
    weak = st.ask()
    weak.report(0.95, 0)  # the best retrieval score so far: carries on
    assert not weak.should_prune()
    weak.report(0.20, 1)  # the worst slice objective: stops, though its best report (0.95) beats every median
    assert weak.should_prune()
    assert not optuna.pruners.MedianPruner(n_startup_trials=2).prune(st, st.trials[-1])  # what Optuna's would do
    strong = st.ask()
    strong.report(0.86, 0)
    assert not strong.should_prune()  # median of 0.90 and 0.80
    strong.report(0.60, 1)
    assert not strong.should_prune()
    alone = optuna.create_study(direction="maximize", pruner=StepMedianPruner(n_startup_trials=3))
    alone.add_trial(optuna.trial.create_trial(value=0.4, intermediate_values={0: 0.9}))
    early = alone.ask()
    early.report(0.1, 0)
    assert not early.should_prune()  # one finished trial with this step is fewer than 3


def test_questions_without_answers_compile_on_the_shipped_triad_space(tmp_path):
    """A user with questions but no answers or gold: `optimizers/triad.yaml` scores the RAG triad only."""
    from declrag.golden import load_golden

    qs = tmp_path / "questions"
    qs.mkdir()
    (qs / "corpus.jsonl").write_text((GOLD.parent / "corpus.jsonl").read_text())
    rows = [json.loads(line) for line in GOLD.read_text().splitlines()]
    (qs / "all.jsonl").write_text("".join(json.dumps({"id": r["id"], "question": r["question"]}) + "\n" for r in rows))
    golden = load_golden(str(qs / "all.jsonl"))
    assert all(not e.answers and not e.gold for e in golden.split("all"))
    with using_lm(answers_by_prompt()):
        s = compile(CompileOptions("triad", str(qs / "all.jsonl"), "qs", tmp_path / "runs", Budget(max_trials=3),
                                   progress=False))
    assert s.trials == 3 and 0 < s.best["dev"]["objective"] <= 1
    assert s.best["test"]["objective"] is not None
    assert (tmp_path / "runs" / "qs" / "best" / "program.json").exists()


@pytest.mark.parametrize("declared, objectives, expected", [
    ("", 1, optuna.samplers.TPESampler), ("", 2, optuna.samplers.NSGAIISampler),
    ("sampler: {name: random}", 1, optuna.samplers.RandomSampler),
    ("sampler: {name: qmc, options: {qmc_type: halton}}", 1, optuna.samplers.QMCSampler),
    ("sampler: {name: cmaes, options: {n_startup_trials: 2}}", 1, optuna.samplers.CmaEsSampler),
    ("sampler: {name: gp}", 1, optuna.samplers.GPSampler),
    ("sampler: {name: nsga2, options: {population_size: 8}}", 2, optuna.samplers.NSGAIISampler),
    ("sampler: {name: grid}\nbase: {retrieve: {k: 2}}", 1, optuna.samplers.BruteForceSampler),
])
def test_the_space_chooses_the_sampler_and_its_options(tmp_path, declared, objectives, expected):
    from declrag.optimize._workers import sampler_and_pruner

    text = SPACE + declared + "\n"
    if objectives == 2:
        text = text.replace("sia: 0.5}}", "sia: 0.5}, also: [cost_usd]}")
    f = tmp_path / "s.yaml"
    f.write_text(text)
    sp = read_space(f)
    directions, sampler, _ = sampler_and_pruner(sp)
    assert type(sampler) is expected and len(directions) == objectives
    if expected is optuna.samplers.TPESampler:  # today's defaults: joint model, parallel workers spread out
        assert sampler._multivariate and sampler._constant_liar
    if "options" in declared:
        name, value = declared.split("options: {")[1].rstrip("}").split(": ")
        held = {"qmc_type": "_qmc_type", "n_startup_trials": "_n_startup_trials", "population_size": "_population_size"}
        assert str(getattr(sampler, held[name])) == value.strip().rstrip("}")


def test_a_grid_compile_scores_every_program_once_and_stops(space, tmp_path):
    f = tmp_path / "grid.yaml"
    text = SPACE.replace("prompt_optimizer: {name: bootstrap, max_demos: 1, max_examples: 4}",
                         "sampler: {name: grid}").replace("high: 3}", "high: 2}")
    f.write_text(text)
    with pytest.raises(DeclragError, match=r"naive baseline \(trial 0: k=5, alpha=0.5"):  # k 5 is off the grid
        read_space(f)
    f.write_text(text + "base: {retrieve: {k: 2}}\n")
    programs = {tuple(sorted(c.items())) for c in grid(read_space(f))}
    assert len(programs) == 2 * 3 * 2 * (1 + 3)
    with using_lm(answers_by_prompt()):
        s = compile(CompileOptions(f, str(GOLD), "g", tmp_path / "runs", Budget(max_trials=200), progress=False))
    trials = [json.loads(x) for x in (tmp_path / "runs" / "g" / "trials.jsonl").read_text().splitlines()]
    seen = [tuple(sorted(t["params"].items())) for t in trials]  # the naive baseline is one of them
    assert set(seen) == programs and len(seen) == len(programs)  # each once, then the search ended by itself
    assert s.trials == len(programs)


SMALL_SPACE = SPACE.split("params:")[0] + """params:
  k: {path: retrieve.k, type: int, low: 1, high: 2}
  alpha: {path: retrieve.alpha, type: float, low: 0.0, high: 1.0, step: 0.5}
  rerank: {path: rerank.mode, type: categorical, choices: [none, bm25]}
prompt_optimizer: {name: none}
base: {retrieve: {k: 2}}
"""


def test_a_search_bounded_by_lm_calls_alone_ends_when_its_sampler_only_proposes_programs_already_scored(
        tmp_path, caplog):
    """Retrieval-first pruning costs no LM call, nor does a repeat: on a small space, a search that only an LM-call
    budget bounds sampled free trials for ever (the PostgreSQL two-worker test ran 1,480 of them; TPE found 44 of
    48 programs in 3,684 trials). It ends after `KNOWN_MAX` known programs in a row."""
    from declrag.optimize._workers import KNOWN_MAX

    f = tmp_path / "space.yaml"
    f.write_text(SMALL_SPACE)
    programs = {tuple(sorted(c.items())) for c in grid(read_space(f))}
    with using_lm(answers_by_prompt()), caplog.at_level("WARNING"):
        s = compile(CompileOptions(f, str(GOLD), "lm", tmp_path / "runs", Budget(max_lm_calls=10**6),
                                   progress=False))
    trials = [json.loads(x) for x in (tmp_path / "runs" / "lm" / "trials.jsonl").read_text().splitlines()]
    scored = {tuple(sorted(t["params"].items())) for t in trials}
    assert scored <= programs and s.trials == len(trials) < 10 * KNOWN_MAX
    assert f"proposed {KNOWN_MAX} programs in a row that were already scored" in caplog.text


def test_retrieval_first_pruning_reads_retrieval_quality_not_the_characters_handed_over(space, tmp_path):
    """The pruner's first step is the candidates' retrieval quality; the characters a program hands over are a
    cost beside it, and counted in the step they made the pruner keep the programs that hand over most."""
    from declrag.golden import load_golden
    from declrag.optimize._objective import Objective

    comp = Objective(read_space(space), load_golden(str(GOLD)), tmp_path / "out", progress=False)
    reported: list[float] = []
    trial = type("T", (), {"report": lambda self, v, step: reported.append(v), "should_prune": lambda self: True})()
    result: dict = {}
    with pytest.raises(optuna.TrialPruned):
        comp._steps(trial, comp.program({"k": 3}), result)
    assert result["retrieval:context_chars"] > 10  # measured and logged beside the quality ...
    quality = [v for k, v in result.items() if k.startswith("retrieval:") and k != "retrieval:context_chars"]
    assert reported == [pytest.approx(sum(quality) / len(quality))] and reported[0] <= 1.0  # ... and not pruned on


BUDGET_SPACE = """
name: at-budget
objective: {metrics: {ndcg@budget: 1.0}}
split: {fractions: {train: 0.25, dev: 0.5, test: 0.25}, seed: 3}
params:
  k: {path: retrieve.k, type: int, low: 1, high: 3}
  window: {path: retrieve.window, type: int, low: 0, high: 1}
prompt_optimizer: {name: none}
"""


@pytest.mark.parametrize("given", [None, 120, 5])
def test_a_retrieval_compile_scores_at_the_baselines_context_and_shows_quality_against_it(tmp_path, given):
    """5 characters is less than one passage (a sentence of the tiny corpus): scored within one passage instead."""
    f = tmp_path / "space.yaml"
    f.write_text(BUDGET_SPACE)
    s = compile(CompileOptions(f, str(GOLD), "b", tmp_path / "runs", Budget(max_trials=4), progress=False,
                               context_budget=given))
    budget = s.summary["objective"]["context_budget"]
    if given == 5:
        assert 20 < budget < 100  # one passage of the default program, about a sentence
    else:
        assert budget == given if given else budget >= 100  # the baseline's characters handed over, rounded to 100
    assert list(s.summary["objective"]["metrics"]) == [f"ndcg@{budget}c"]
    trials = [json.loads(x) for x in (tmp_path / "runs" / "b" / "trials.jsonl").read_text().splitlines()]
    assert all(t["metrics"]["context_chars"] > 0 for t in trials if t.get("metrics"))
    report = (tmp_path / "runs" / "b" / "report.md").read_text()
    assert "## Quality against context" in report and (tmp_path / "runs" / "b" / "plots" / "context.png").is_file()


def test_a_context_budget_is_a_positive_number_of_characters(tmp_path):
    f = tmp_path / "space.yaml"
    f.write_text(BUDGET_SPACE)
    with pytest.raises(DeclragError, match="at least 1"):
        compile(CompileOptions(f, str(GOLD), "b", tmp_path / "runs", Budget(max_trials=1), progress=False,
                               context_budget=0))
