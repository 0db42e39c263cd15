"""`declrag.runtime.tracing`: the spans of a question (one per stage and LM call, with the GenAI conventions' attributes),
content only on opt-in, the caller's traceparent honoured, nothing recorded and nothing broken when off. Spans are
collected by the OpenTelemetry SDK's in-memory exporter; tests/live/test_tracing_jaeger.py reads them back from a
real Jaeger."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from declrag.runtime import tracing
from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.lm import using_lm
from declrag.pipeline.program import RAGProgram
from declrag.serve import ServeSettings, create_app
from declrag.testing import HashEmbedder, StreamingLM

from tests.conftest import filled_store
from tests.unit.serve.test_serve import client

Q = "What is the capital of Italy?"
ANSWER = "Rome is the capital of Italy [1]."
STAGES = {"history", "rewrite", "retrieve", "rerank", "select", "generate", "judge"}


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    store = filled_store(tmp_path_factory.mktemp("tracing") / "store")
    config = ProgramConfig.model_validate({"judge": {"mode": "grounding"}})
    return RAGProgram(config, store=store, embedder=HashEmbedder())


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert tracing.configure(provider=provider)
    yield exporter
    tracing.shutdown()


def by_name(exporter) -> dict:
    return {s.name: s for s in exporter.get_finished_spans()}


def test_off_by_default_records_nothing_and_answers(prog, monkeypatch):
    for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(k, raising=False)
    assert tracing.configure() is False and not tracing.enabled()
    assert tracing.span("x") is tracing.span("y")  # one shared no-op context: nothing allocated per span
    with using_lm(StreamingLM(ANSWER)):
        assert prog(question=Q).answer == ANSWER


def test_a_question_has_a_span_per_stage_and_per_lm_call_with_the_genai_attributes(prog, spans):
    with using_lm(StreamingLM(ANSWER)):
        prog(question=Q)
    got = spans.get_finished_spans()
    root = next(s for s in got if s.name == "answer")
    children = [s for s in got if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert {s.attributes["declrag.stage"] for s in children} == STAGES
    assert all(s.context.trace_id == root.context.trace_id for s in got)
    retrieval = next(s for s in children if s.attributes["declrag.stage"] == "retrieve")
    assert retrieval.name == f"retrieval {prog.store_uri}"
    assert retrieval.attributes["gen_ai.operation.name"] == "retrieval"
    assert retrieval.attributes["gen_ai.data_source.id"] == prog.store_uri
    docs = json.loads(retrieval.attributes["gen_ai.retrieval.documents"])
    assert docs and {"id", "score"} == set(docs[0]) and docs[0]["id"] == "rome#0"
    legs = [s for s in got if s.parent is not None and s.parent.span_id == retrieval.context.span_id]
    assert [s.name for s in legs] == ["hybrid search"]
    assert {s.name for s in got if s.parent and s.parent.span_id == legs[0].context.span_id} == \
        {"keyword leg", "vector leg"}
    generate = next(s for s in children if s.attributes["declrag.stage"] == "generate")
    chat = [s for s in got if s.name.startswith("chat ") and s.parent.span_id == generate.context.span_id]
    assert len(chat) == 1
    a = chat[0].attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "declrag-fake"
    assert a["declrag.stage"] == "generate"
    assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    judge = next(s for s in children if s.attributes["declrag.stage"] == "judge")
    event = next(e for e in judge.events if e.name == "gen_ai.evaluation.result")
    assert event.attributes["gen_ai.evaluation.name"] == "declrag.judge.grounding"
    assert event.attributes["gen_ai.evaluation.score.label"] in ("supported", "unsupported")


def test_text_people_wrote_is_left_out_unless_the_operator_opts_in(prog, spans):
    with using_lm(StreamingLM(ANSWER)):
        prog(question=Q)
    text = json.dumps([dict(s.attributes) for s in spans.get_finished_spans()])
    assert "Italy" not in text and "capital" not in text  # no question, passage or answer
    spans.clear()
    tracing._state["content"] = True
    with using_lm(StreamingLM(ANSWER)):
        prog(question=Q)
    got = by_name(spans)
    assert got["answer"].attributes["declrag.question"] == Q
    assert got["hybrid search"].attributes["gen_ai.retrieval.query.text"] == Q
    chat = next(s for s in spans.get_finished_spans() if s.name.startswith("chat "))
    assert Q in chat.attributes["gen_ai.input.messages"] and "Rome" in chat.attributes["gen_ai.output.messages"]


def test_serve_makes_a_server_span_under_the_callers_traceparent(prog, spans):
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    app = create_app(prog, "demo", None, ServeSettings(), lm_override=lambda: StreamingLM(ANSWER))
    with client(app) as c:  # once ready
        r = c.post("/v1/ask", json={"question": Q}, headers={"traceparent": f"00-{trace_id}-{parent}-01"})
        assert r.status_code == 200
        assert c.post("/v1/search", json={"query": Q}).status_code == 200
    got = spans.get_finished_spans()
    server = next(s for s in got if s.name == "POST /v1/ask")
    assert f"{server.context.trace_id:032x}" == trace_id and f"{server.parent.span_id:016x}" == parent
    assert server.attributes["http.response.status_code"] == 200
    answer = next(s for s in got if s.name == "answer")
    assert answer.parent.span_id == server.context.span_id  # the program ran on a worker thread, in the request's trace
    search = next(s for s in got if s.name == "search")
    assert next(s for s in got if s.name == "POST /v1/search").context.span_id == search.parent.span_id


def test_a_receiver_that_is_down_costs_no_answer(prog, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    assert tracing.configure()
    try:
        with using_lm(StreamingLM(ANSWER)):
            assert prog(question=Q).answer == ANSWER
    finally:
        tracing.shutdown()
    assert not tracing.enabled()


def test_an_unsupported_otlp_protocol_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(DeclragError, match="http/protobuf"):
        tracing.configure("http://127.0.0.1:4318")
    assert not tracing.enabled()


def test_compile_trials_and_eval_runs_are_parent_spans_of_their_questions(prog, spans, tmp_path):
    from declrag.evaluate.evaluation import EvalSpec, Evaluation
    from declrag.golden import Example, GoldenSet
    from declrag.optimize import Budget, CompileOptions, compile
    from tests.unit.optimize.test_compile import GOLD, SPACE

    space = tmp_path / "space.yaml"
    space.write_text(SPACE.replace("prompt_optimizer: {name: bootstrap, max_demos: 1, max_examples: 4}",
                                   "prompt_optimizer: {name: none}"))
    lm = StreamingLM(ANSWER)
    with using_lm(lm):
        compile(CompileOptions(space, str(GOLD), "traced", tmp_path / "runs", Budget(max_trials=2), progress=False))
    got = spans.get_finished_spans()
    trials = {s.name: s for s in got if s.name.startswith("trial ")}
    assert set(trials) == {"trial 0", "trial 1"}
    assert trials["trial 0"].attributes["declrag.trial"] == 0
    assert trials["trial 0"].attributes["declrag.param.k"] == 5  # the naive baseline's
    under = {s.parent.span_id for s in got if s.name == "answer" and s.parent is not None}
    assert {t.context.span_id for t in trials.values()} <= under  # each trial's questions are its children

    spans.clear()
    golden = GoldenSet("tiny", [], {"dev": [Example(id="q1", question=Q, answers=("Rome",), gold={"rome": 1})]})
    with using_lm(lm):
        Evaluation(prog, golden, EvalSpec(dataset="tiny", split="dev", metrics=["f1"]), tmp_path / "eval",
                   progress=False).run()
    got = spans.get_finished_spans()
    run = next(s for s in got if s.name == "eval tiny")
    answer = next(s for s in got if s.name == "answer")
    assert answer.parent.span_id == run.context.span_id  # on the evaluation's worker thread, in its trace
