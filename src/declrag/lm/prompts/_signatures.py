"""Declarative prompts: `signatures/*.yaml` -> DSPy signatures.

One file per signature: its stage, typed input and output fields, named instruction variants (the prompt
variants compile searches over) and optional few-shot demos. ``{abstain}`` in an instruction is replaced by
the program's abstention phrase. A saved program carries the specs it was built from, so it does not
depend on this folder once saved.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import dspy
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ...errors import DeclragError
from ...runtime.resources import search_dirs

TYPES: dict[str, Any] = {"str": str, "list[str]": list[str], "bool": bool, "float": float, "int": int}


class FieldSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["str", "list[str]", "bool", "float", "int"] = "str"
    desc: str = ""
    optional: bool = False  # an input that may be left out (the prompt then does not mention its value)


class SignatureSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    stage: str
    inputs: dict[str, FieldSpec]
    outputs: dict[str, FieldSpec]
    variants: dict[str, str]
    default: str
    demos: list[dict[str, Any]] = []

    @model_validator(mode="after")
    def _check(self) -> SignatureSpec:
        if not self.inputs or not self.outputs:
            raise ValueError("inputs and outputs must each name at least one field")
        if clash := set(self.inputs) & set(self.outputs):
            raise ValueError(f"fields cannot be both input and output: {sorted(clash)}")
        if self.default not in self.variants:
            raise ValueError(f"default variant {self.default!r} is not one of the variants {sorted(self.variants)}")
        for i, demo in enumerate(self.demos):
            if missing := (set(self.inputs) | set(self.outputs)) - set(demo):
                raise ValueError(f"demos.{i} lacks fields {sorted(missing)}")
        return self

    def instructions(self, variant: str | None = None, **params: str) -> str:
        name = variant or self.default
        if name not in self.variants:
            raise DeclragError(f"unknown prompt variant {name!r} for the {self.stage} stage",
                               hint=f"variants: {', '.join(sorted(self.variants))}")
        text = self.variants[name]
        for k, v in params.items():
            text = text.replace("{" + k + "}", v)
        return text

    def build(self, variant: str | None = None, **params: str) -> type[dspy.Signature]:
        fields = {n: (TYPES[f.type] | None, dspy.InputField(desc=f.desc, default=None)) if f.optional else
                  (TYPES[f.type], dspy.InputField(desc=f.desc)) for n, f in self.inputs.items()}
        fields |= {n: (TYPES[f.type], dspy.OutputField(desc=f.desc)) for n, f in self.outputs.items()}
        return dspy.make_signature(fields, self.instructions(variant, **params))


def signature_dirs() -> list[Path]:
    """$DECLRAG_SIGNATURES, ./signatures, then the packaged defaults; earlier folders win (see resources)."""
    return search_dirs("signatures")


def read_spec(path: Path) -> SignatureSpec:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise DeclragError(f"{path}: cannot read signature file: {e}", hint="fix the YAML syntax") from e
    if not isinstance(data, dict):
        raise DeclragError(f"{path}: a signature file must be a mapping", hint="see signatures/generate.yaml")
    try:
        return SignatureSpec.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(map(str, err["loc"])) or "(top level)"
        raise DeclragError(f"{path}: field {where}: {err['msg']}",
                           hint="fields: stage, inputs, outputs, variants, default, demos; types: "
                                + ", ".join(TYPES)) from e


@lru_cache(maxsize=8)
def _load_all(dirs: tuple[str, ...], stamp: tuple) -> dict[str, SignatureSpec]:
    found: dict[str, SignatureSpec] = {}
    for d in dirs:
        for f in sorted(Path(d).glob("*.yaml")):
            if f.stem not in found:
                found[f.stem] = read_spec(f)
    return found


def load_specs() -> dict[str, SignatureSpec]:
    """Every signature spec by name (file stem)."""
    dirs = tuple(str(d) for d in signature_dirs() if d.is_dir())
    stamp = tuple((str(f), f.stat().st_mtime_ns) for d in dirs for f in sorted(Path(d).glob("*.yaml")))
    return _load_all(dirs, stamp)


def spec(name: str) -> SignatureSpec:
    specs = load_specs()
    if name not in specs:
        raise DeclragError(f"no signature file {name}.yaml in {', '.join(str(d) for d in signature_dirs())}; "
                           f"available: {', '.join(sorted(specs)) or 'none'}",
                           hint="restore it with `declrag init` (it copies only missing files), or add it to "
                                "./signatures or $DECLRAG_SIGNATURES")
    return specs[name]
