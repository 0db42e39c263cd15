"""LiteLLM routing and metering, the plain-text adapter, and the adapter choice per model."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from declrag.config import LMConfig
from declrag.errors import DeclragError
from declrag.lm import Meter, make_lm, metering, resolve_local, stage
from declrag.lm.prompts._adapters import PlainTextAdapter, adapter_for, coerce


def test_priced_routes_record_litellms_cost_and_tokens(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    lm = make_lm(LMConfig(route="openai/gpt-4o-mini"))
    meter = Meter()
    with metering(meter), stage("generate"):
        lm("Say hi", mock_response="hello there", cache=False)  # LiteLLM answers itself: no network
    u = meter.stages["generate"]
    assert u.calls == 1 and u.cached == 0 and u.tokens_in > 0 and u.tokens_out > 0
    assert u.cost_usd == pytest.approx(u.tokens_in * 1.5e-7 + u.tokens_out * 6e-7, rel=1e-6)
    assert meter.to_dict()["total"]["cost_usd"] == pytest.approx(u.cost_usd)


def test_cache_hits_are_counted_apart(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    lm = make_lm(LMConfig(route="openai/gpt-4o-mini", temperature=0.0))
    meter = Meter()
    with metering(meter), stage("judge"):
        lm("cache me please", mock_response="ok")
        lm("cache me please", mock_response="ok")
    u = meter.stages["judge"]
    assert u.calls == 2 and u.cached == 1


def test_enclosing_meters_see_the_calls_of_inner_ones(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    lm = make_lm(LMConfig(route="openai/gpt-4o-mini"))
    outer, inner = Meter(), Meter()
    with metering(outer), stage("generate"):
        lm("before", mock_response="a", cache=False)
        with metering(inner):  # e.g. a program's own meter, run by a prompt optimizer
            lm("inside", mock_response="b", cache=False)
        lm("after", mock_response="c", cache=False)
    assert outer.stages["generate"].calls == 3 and inner.stages["generate"].calls == 1
    assert outer.total().tokens_in > inner.total().tokens_in > 0


def test_adapter_is_chosen_per_model_and_overridable():
    assert isinstance(adapter_for(LMConfig(route="local/smollm2")), PlainTextAdapter)
    assert isinstance(adapter_for(LMConfig(route="openai/gpt-4o-mini")), dspy.ChatAdapter)
    assert isinstance(adapter_for(LMConfig(route="ollama/smollm2:135m")), PlainTextAdapter)
    assert isinstance(adapter_for(LMConfig(route="openai/gpt-4o-mini", adapter="plain")), PlainTextAdapter)
    assert isinstance(adapter_for(LMConfig(route="local/smollm2", adapter="json")), dspy.JSONAdapter)


def test_plain_adapter_prompts_in_plain_text_and_parses_leniently():
    sig = dspy.Signature("question, context -> answer", "Answer briefly.")
    msgs = PlainTextAdapter().format(sig, [{"question": "q0", "context": "c0", "answer": "a0"}],
                                     {"question": "Who?", "context": "[1] Ann."})
    assert msgs[0] == {"role": "system", "content": "Answer briefly."}
    assert msgs[1]["content"] == "Question:\nq0\n\nContext:\nc0" and msgs[2] == {"role": "assistant", "content": "a0"}
    assert msgs[-1]["content"] == "Question:\nWho?\n\nContext:\n[1] Ann."
    assert "[[" not in "".join(m["content"] for m in msgs)
    assert PlainTextAdapter().parse(sig, "  Ann, I think [1].\n") == {"answer": "Ann, I think [1]."}
    with dspy.context(lm=DummyLM([{"answer": "Ann [1]"}], adapter=PlainTextAdapter()), adapter=PlainTextAdapter()):
        assert dspy.Predict(sig)(question="Who?", context="[1] Ann.").answer == "Ann [1]"


def test_coercion():
    assert coerce("1. alpha\n- beta\n\n* gamma", list[str]) == ["alpha", "beta", "gamma"]
    assert coerce("Yes, it is.", bool) is True and coerce("No. Not supported.", bool) is False
    assert coerce("It is not relevant", bool) is False and coerce("maybe", bool) is False
    assert coerce("Score: 7.5 out of 10", float) == 7.5 and coerce("none", int) == 0


def test_local_model_names_resolve_to_files():
    assert resolve_local("smollm2").name.endswith(".gguf")
    with pytest.raises(DeclragError, match="unknown local model"):
        resolve_local("gpt-5-local")


def test_the_registry_owns_the_process_wide_caches_and_clear_releases_them():
    from declrag.lm import registry
    from declrag.metrics._embedding import shared_embedder
    from declrag.metrics._judges import make_judge_metric

    registry.clear()
    emb = shared_embedder()
    assert shared_embedder() is emb
    m1 = make_judge_metric("faithfulness_llm", ["openai/judge-a"])
    m2 = make_judge_metric("correctness_llm", ["openai/judge-a"])
    assert m1.judges[0] is m2.judges[0]  # one judge per route, shared by the metrics
    assert {"embedder:metrics", "judge:openai/judge-a"} <= set(registry.loaded()["shared"])
    registry.clear()
    assert registry.loaded()["shared"] == [] and shared_embedder() is not emb
