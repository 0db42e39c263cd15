"""OpenTelemetry traces of declrag's work: off by default, and free when off (a span is a shared no-op context).

On when `configure` is given an OTLP endpoint (`declrag serve --otlp-endpoint`), or when the standard environment
names one (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``; ``OTEL_SDK_DISABLED=true``
keeps it off). The rest is the SDK's standard configuration: ``OTEL_SERVICE_NAME`` (default ``declrag``),
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` and ``_ARG``, ``OTEL_EXPORTER_OTLP_HEADERS``. Spans go out over
OTLP/HTTP (protobuf) in batches, from a background thread; an unreachable receiver costs a dropped batch and one
logged warning, never a request.

Spans follow the OpenTelemetry GenAI semantic conventions v0.1.0 (open-telemetry/semantic-conventions-genai, which
continues semantic-conventions v1.41.0; status Development): ``chat {model}`` per LM call (``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``/``output_tokens``, and the cost as
``declrag.lm.cost_usd``), ``retrieval {store}`` (``gen_ai.data_source.id``, ``gen_ai.retrieval.top_k``,
``gen_ai.retrieval.documents`` as ids and scores), and the self-judge's verdict as a ``gen_ai.evaluation.result``
event. `declrag compile` puts each trial's questions under a ``trial N`` span, `declrag eval` under ``eval {set}``,
`declrag synth` under ``synth``. Text a user or a document wrote (the question, the
passages, prompts and completions) is recorded only when the operator opts in (``--otlp-content`` or the
conventions' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), since it may hold private data.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..errors import DeclragError

log = logging.getLogger(__name__)
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_OFF = contextlib.nullcontext(INVALID_SPAN)  # what every span is while tracing is off: reusable, no allocation
_state: dict[str, Any] = {"tracer": None, "provider": None, "content": False}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def configure(endpoint: str | None = None, *, content: bool | None = None, provider: Any = None) -> bool:
    """Turn tracing on when ``endpoint`` (an OTLP/HTTP base URL such as ``http://127.0.0.1:4318``, or its full
    ``/v1/traces`` URL) or the environment names a receiver, or when ``provider`` (an SDK ``TracerProvider`` of your
    own, e.g. with an in-memory exporter) is given. Returns whether tracing is on. Calling it again replaces the
    earlier set-up (its spans are flushed first)."""
    shutdown()
    env_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    _state["content"] = _truthy(os.environ.get(CONTENT_ENV)) if content is None else content
    if provider is None and (_truthy(os.environ.get("OTEL_SDK_DISABLED")) or not (endpoint or env_endpoint)):
        return False
    if provider is None:
        provider = _otlp_provider(endpoint)
    _state["provider"], _state["endpoint"] = provider, endpoint
    _state["tracer"] = provider.get_tracer("declrag")
    if not _state.get("atexit"):  # the last batch goes out when the process ends
        _state["atexit"] = atexit.register(shutdown)
    return True


def _otlp_provider(endpoint: str | None) -> Any:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol != "http/protobuf":
        raise DeclragError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: declrag sends OTLP over HTTP (http/protobuf)",
                           "unset it, and point the endpoint at the receiver's HTTP port (4318 by default)")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as e:
        raise DeclragError(f"tracing needs the OpenTelemetry SDK ({e.name} is missing)",
                           "pip install 'declrag[otel]'") from e
    if endpoint and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    service = os.environ.get("OTEL_SERVICE_NAME") or "declrag"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint or None, timeout=5)))
    return provider


def shutdown() -> None:
    """Flush the spans not yet sent and turn tracing off."""
    provider, _state["provider"], _state["tracer"] = _state["provider"], None, None
    if provider is not None:
        provider.shutdown()


def given() -> dict[str, Any]:
    """What `configure` was given (the endpoint, the content opt-in): for another process to configure the same."""
    return {"endpoint": _state.get("endpoint"), "content": _state["content"]}


def enabled() -> bool:
    return _state["tracer"] is not None


def content() -> bool:
    """Whether spans may carry text that users and documents wrote (the operator's opt-in)."""
    return _state["content"] and enabled()


def span(name: str, attributes: Mapping[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL,
         ) -> contextlib.AbstractContextManager[Span]:
    """A child span of the current one, current while the block runs; an exception ends it with an error status. Off:
    the shared no-op context, whose span takes attributes and events and drops them."""
    tracer = _state["tracer"]
    if tracer is None:
        return _OFF
    return tracer.start_as_current_span(name, kind=kind, attributes=_clean(attributes))


@contextlib.contextmanager
def incoming(headers: Mapping[str, str], name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span]:
    """A server span for one request, the child of the caller's ``traceparent`` header where one came."""
    tracer = _state["tracer"]
    if tracer is None:
        yield INVALID_SPAN
        return
    token = otel_context.attach(TraceContextTextMapPropagator().extract(headers))
    try:
        with tracer.start_as_current_span(name, kind=SpanKind.SERVER, attributes=_clean(attributes)) as s:
            yield s
    finally:
        otel_context.detach(token)


def annotate(attributes: Mapping[str, Any]) -> None:
    """Attributes on the current span, where one records (the parameters of a trial, known once sampled)."""
    s = trace.get_current_span()
    if s.is_recording():
        s.set_attributes(_clean(attributes) or {})


def failed(s: Span, error: BaseException | str) -> None:
    """Mark ``s`` as failed (``error.type`` and an error status) without an exception propagating through it."""
    kind = error if isinstance(error, str) else type(error).__name__
    s.set_attribute("error.type", kind)
    s.set_status(Status(StatusCode.ERROR, str(error)[:300]))


def current_ids() -> tuple[str, str] | None:
    """The current trace and span ids in hex (what a log line or a reply can carry), or None."""
    ctx = trace.get_current_span().get_span_context()
    return (f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}") if ctx.is_valid else None


def documents(hits: Any) -> str:
    """``gen_ai.retrieval.documents``: the hits' chunk ids and scores as a JSON string (OTLP attributes are flat)."""
    return json.dumps([{"id": h.chunk.id, "score": round(float(h.score), 6)} for h in hits])


def evaluation(s: Span, name: str, score: float | None = None, label: str | None = None,
               explanation: str | None = None) -> None:
    """A ``gen_ai.evaluation.result`` event on ``s``: a judge's or a metric's verdict."""
    s.add_event("gen_ai.evaluation.result", _clean({
        "gen_ai.evaluation.name": name, "gen_ai.evaluation.score.value": score,
        "gen_ai.evaluation.score.label": label,
        "gen_ai.evaluation.explanation": explanation if content() else None}))


def lm_span(model: str, stage: str, settings: Mapping[str, Any], messages: Any
            ) -> contextlib.AbstractContextManager[Span]:
    """The span of one LM call (``chat {model}``, kind CLIENT) made by ``stage``; the prompt only with content on."""
    if _state["tracer"] is None:
        return _OFF
    provider, _, name = model.partition("/")
    return span(f"chat {model}", {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider if name else "litellm",
        "gen_ai.request.model": model, "gen_ai.request.temperature": settings.get("temperature"),
        "gen_ai.request.max_tokens": settings.get("max_tokens"), "declrag.stage": stage,
        "gen_ai.input.messages": json.dumps(messages, default=str) if content() and messages else None,
    }, SpanKind.CLIENT)


def lm_result(s: Span, entry: Mapping[str, Any] | None) -> None:
    """The tokens, cost and (content on) completion of an LM call, from DSPy's history entry of it."""
    if not s.is_recording() or entry is None:
        return
    usage = entry.get("usage") or {}
    s.set_attributes(_clean({
        "gen_ai.usage.input_tokens": usage.get("prompt_tokens"),
        "gen_ai.usage.output_tokens": usage.get("completion_tokens"),
        "declrag.lm.cost_usd": entry.get("cost"), "declrag.lm.cached": not usage,
        "gen_ai.response.model": entry.get("response_model"),
        "gen_ai.output.messages": json.dumps(entry.get("outputs"), default=str) if content() else None,
    }) or {})


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """OTLP takes str, bool, int, float and lists of one of them; None values are left out."""
    if not attributes:
        return None
    return {k: v if isinstance(v, str | bool | int | float | list | tuple) else str(v)
            for k, v in attributes.items() if v is not None}
