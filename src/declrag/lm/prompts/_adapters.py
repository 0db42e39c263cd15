"""Adapters: how a DSPy signature becomes a prompt, and a completion becomes output fields.

Strong models keep DSPy's `ChatAdapter` (field markers; no silent JSON retry). Small local models cannot
follow field markers (SmolLM2 answers DSPy's JSON adapter with unrelated code), so `PlainTextAdapter`
prompts in plain text (instructions, then each input under its name) and parses leniently: the whole
completion is the single output field, with light coercion for lists, booleans and numbers.
"""

from __future__ import annotations

import re
import typing
from typing import Any

import dspy
from dspy.adapters.base import Adapter

from ...config import LMConfig
from .. import is_small_local

_BULLET = re.compile(r"^\s*(?:[-*•]+|\(?\d+[.)]|[a-z][.)])\s*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_YES = re.compile(r"\b(yes|true|supported|correct|relevant)\b", re.I)
_NO = re.compile(r"\b(no|false|unsupported|not supported|incorrect|irrelevant|not relevant)\b", re.I)


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def _render(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "\n".join(f"{i}. {v}" for i, v in enumerate(value, 1))
    return str(value)


def coerce(text: str, annotation: Any) -> Any:
    """Read a value of ``annotation`` out of free text, as leniently as sensible."""
    text = text.strip()
    origin = typing.get_origin(annotation)
    if annotation is bool:
        yes, no = _YES.search(text), _NO.search(text)
        if yes and no:
            return yes.start() < no.start()
        return bool(yes) if (yes or no) else False
    if annotation in (int, float):
        m = _NUMBER.search(text)
        return annotation(float(m.group())) if m else annotation(0)
    if origin is list:
        items = [_BULLET.sub("", line).strip().strip('"') for line in text.splitlines()]
        return [i for i in items if i]
    return text


class PlainTextAdapter(Adapter):
    """Plain-text prompts and lenient parsing, for models that cannot follow DSPy's field markers."""

    def format(self, signature, demos, inputs):
        messages = []
        if signature.instructions:
            messages.append({"role": "system", "content": signature.instructions.strip()})
        for demo in demos:
            if all(k in demo for k in signature.input_fields) and all(k in demo for k in signature.output_fields):
                messages.append({"role": "user", "content": self._user(signature, demo)})
                messages.append({"role": "assistant",
                                 "content": "\n".join(_render(demo[k]) for k in signature.output_fields)})
        messages.append({"role": "user", "content": self._user(signature, inputs)})
        return messages

    def _user(self, signature, values) -> str:
        parts = [f"{_label(k)}:\n{_render(values[k])}" for k in signature.input_fields if values.get(k) is not None]
        return "\n\n".join(parts)

    def parse(self, signature, completion):
        names = list(signature.output_fields)
        if len(names) == 1:
            return {names[0]: coerce(completion, signature.output_fields[names[0]].annotation)}
        out, lines = {}, completion.splitlines()
        for name in names:  # "Field: value" lines when the model writes them; else the first field gets it all
            pat = re.compile(rf"^\s*{re.escape(_label(name))}\s*:\s*(.*)$", re.I)
            hit = next((pat.match(line).group(1) for line in lines if pat.match(line)), None)
            if hit is not None:
                out[name] = coerce(hit, signature.output_fields[name].annotation)
        if not out:
            out[names[0]] = coerce(completion, signature.output_fields[names[0]].annotation)
        return out

    def format_field_with_value(self, fields_with_values, role: str = "assistant") -> str:
        return "\n".join(_render(v) for v in fields_with_values.values())


def adapter_for(cfg: LMConfig) -> Adapter:
    """The adapter for a route: ``cfg.adapter`` when set, else plain text for small local models."""
    choice = cfg.adapter if cfg.adapter != "auto" else ("plain" if is_small_local(cfg.route) else "chat")
    if choice == "plain":
        return PlainTextAdapter()
    if choice == "json":
        return dspy.JSONAdapter()
    return dspy.ChatAdapter(use_json_adapter_fallback=False)
