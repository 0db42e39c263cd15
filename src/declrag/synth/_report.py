"""What a `declrag synth` run did (`SynthReport`): written as the set's ``report.json`` and summed up in its
``dataset.yaml`` description."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._generate import Candidate


@dataclass
class SynthReport:
    """What a synth run did: candidates generated, how many each filter removed (with examples), kept by split."""

    generator: str
    seed: int
    documents: int
    passages: int
    generated: int = 0
    removed: dict[str, int] = field(default_factory=dict)
    removed_examples: dict[str, list[str]] = field(default_factory=dict)
    kept: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    splits: dict[str, int] = field(default_factory=dict)
    split: str = ""  # how: "by document", or "by regions of each document: N regions" (`splits.split`)
    found_by: dict[str, int] = field(default_factory=dict)
    judged_gold_added: int = 0
    gold: str = "seed document only"
    filters_off: list[str] = field(default_factory=list)
    lm: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    out: str = ""

    def drop(self, reason: str, c: Candidate) -> None:
        self.removed[reason] = self.removed.get(reason, 0) + 1
        shown = self.removed_examples.setdefault(reason, [])
        if len(shown) < 5:
            shown.append(c.question)

    def summary(self) -> str:
        removed = ", ".join(f"{n} {r}" for r, n in self.removed.items()) or "none"
        return (f"{self.kept} questions kept of {self.generated} generated from {self.passages} passages of "
                f"{self.documents} documents ({', '.join(f'{k} {v}' for k, v in self.splits.items())}; split "
                f"{self.split}); removed: {removed}; {self.wall_s} s")
