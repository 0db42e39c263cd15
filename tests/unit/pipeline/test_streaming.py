"""Token streaming below the server: the incremental citation clean-up against `resolve_citations`, stop
strings, and the in-process local model streaming through LiteLLM (llama.cpp and the transformers backend),
stopped early by a consumer that leaves. The server's streaming is tested in test_serve.py."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import litellm
import pytest

from declrag.lm import _cut_at_stop, setup
from declrag.pipeline.stages.generate._postprocess import resolve_citations
from declrag.pipeline.stages.generate._streaming import CitationStream

MESSAGES = [{"role": "user", "content": "Name three colours, separated by commas."}]


@pytest.mark.parametrize("raw", [
    "Rome is the capital of Italy [1].",
    "Rome [1] is big [2, 3] and old [9] .  Really  [ 2 ;4 ] !",
    "Marks [Note: none] and [1][12] at the end [3",
    "  Leading space, trailing space [2]   ",
    "Numbers [10] of ten passages [10], tabs\tand  runs\t\t.",
])
def test_citation_stream_sends_a_prefix_of_the_final_text_whatever_the_token_split(raw):
    final = resolve_citations(raw, 10).text
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(1, 12))))
        pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])]
        stream, sent = CitationStream(10), ""
        for piece in pieces:
            sent += stream.feed(piece)
            assert final.startswith(sent), (pieces, sent)
        assert sent == stream.sent and final.startswith(sent) and len(final) - len(sent) <= 6


def test_citation_stream_holds_markers_until_they_close():
    s = CitationStream(3)
    assert s.feed("Rome") == "Rome" and s.feed(" [") == "" and s.feed("1") == "" and s.feed("]") == " [1]"
    assert s.feed(" [7") == "" and s.feed("] ok") == " ok"  # a marker to no passage never shows
    assert CitationStream(None).feed("anything") == ""  # the passage count is not known yet


def test_cut_at_stop_holds_back_what_may_be_a_stop_string():
    done = threading.Event()
    assert "".join(_cut_at_stop(iter(["Paris", " is", " EN", "D here"]), ["END"], done)) == "Paris is "
    assert done.is_set()
    assert list(_cut_at_stop(iter(["a", "b", "E"]), ["END"], threading.Event())) == ["a", "b", "E"]
    assert "".join(_cut_at_stop(iter(["no stop"]), [], threading.Event())) == "no stop"


def stream_texts(**kw) -> tuple[list[str], object]:
    chunks = list(litellm.completion(model="local/smollm2", messages=MESSAGES, stream=True, **kw))
    return [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content], chunks


@pytest.mark.parametrize("backend", ["llama-cpp", "transformers"])
def test_local_model_streams_its_tokens_through_litellm(monkeypatch, backend):
    """The same reply as without streaming, in many pieces, with the same usage on the last chunk."""
    if backend == "transformers":
        pytest.importorskip("gguf")
    else:
        pytest.importorskip("llama_cpp")
    monkeypatch.setenv("DECLRAG_LOCAL_BACKEND", backend)
    setup()
    whole = litellm.completion(model="local/smollm2", messages=MESSAGES, max_tokens=12, temperature=0)
    pieces, chunks = stream_texts(max_tokens=12, temperature=0)
    assert len(pieces) > 3 and "".join(pieces) == whole.choices[0].message.content
    usage = litellm.stream_chunk_builder(chunks).usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (whole.usage.prompt_tokens, whole.usage.completion_tokens)


def test_a_consumer_that_leaves_stops_the_local_model(monkeypatch):
    """Closing the stream after two tokens stops a generation that would run to max_tokens, and frees the
    model's lock."""
    pytest.importorskip("llama_cpp")
    monkeypatch.setenv("DECLRAG_LOCAL_BACKEND", "llama-cpp")
    setup()
    story = [{"role": "user", "content": "Write a long story about a dog named Rex."}]
    whole = litellm.completion(model="local/smollm2", messages=story, max_tokens=48, temperature=0)
    assert whole.usage.completion_tokens == 48  # left alone, it writes until the limit
    handler = next(p["custom_handler"] for p in litellm.custom_provider_map if p["provider"] == "local")
    backend, lock = handler.models.get("smollm2")
    made, real = [], backend.stream_chat

    def counting(*args, **kwargs):
        inner = real(*args, **kwargs)
        try:
            while True:
                piece = next(inner)
                made.append(piece)
                yield piece
        except StopIteration as end:
            return end.value
        finally:
            inner.close()

    monkeypatch.setattr(backend, "stream_chat", counting)

    async def two_tokens() -> list[str]:
        resp = await litellm.acompletion(model="local/smollm2", messages=story, stream=True, max_tokens=48,
                                         temperature=0)
        got = []
        async for chunk in resp:
            if chunk.choices and chunk.choices[0].delta.content:
                got.append(chunk.choices[0].delta.content)
            if len(got) == 2:
                break
        await resp.aclose()
        return got

    assert len(asyncio.run(two_tokens())) == 2
    assert lock.acquire(timeout=60), "the model stayed locked by the abandoned stream"
    lock.release()
    n = len(made)
    time.sleep(0.5)
    assert len(made) == n < 20  # stopped at the next token, far from the 48 it would have written
