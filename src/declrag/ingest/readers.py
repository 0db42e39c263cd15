"""Who may read each document, set when it is indexed (docs/guides/access.md).

Three sources, the most specific first: a JSONL record's own ``readers`` field (`declrag.ingest._records`); the first
rule of a rules file (``declrag index DIR --readers-file rules.yaml``) whose pattern matches the document's file; the
run's groups (``--readers hr,finance``). A document that none of them labels keeps the readers the store holds for it,
so re-indexing a changed file never widens who may read it; a new one is unlabelled (the serving policy says who reads
it). Readers are not part of a document's content hash: a change of readers alone relabels the store's chunks
(`Store.relabel`) and embeds nothing.

A rules file is a YAML mapping, in order, from a pattern to groups (a list, or one comma-separated string)::

    "hr/*": hr
    "finance/*.pdf": [finance, executives]
    "handbook.md": "*"        # everyone

Patterns are shell-style (``fnmatch``: ``*`` also crosses folders), matched against a file's path relative to the
rules file's folder, or against its absolute path when the pattern starts with ``/``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import DeclragError
from ..types import Document, check_readers


@dataclass(frozen=True)
class Readers:
    """How one indexing run labels its documents: ``rules`` (pattern -> groups, first match wins, patterns relative to
    ``base``) and ``default`` (the run's groups; None: none given)."""

    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()
    default: tuple[str, ...] | None = None
    base: Path = Path(".")
    origin: str = ""  # the rules file, as named in messages
    #: readers held before, by document id, where the store does not hold them: a rebuilt store's (`declrag.api.index`)
    kept: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def load(cls, file: str | Path | None = None, default: str | None = None) -> Readers:
        """The run's labelling from ``--readers-file`` and ``--readers``. Raises `DeclragError` naming the file, the
        rule and the fix for a file that is missing or not a mapping of patterns to group names."""
        try:
            groups = check_readers(default, "--readers") if default is not None else None
        except ValueError as e:
            raise DeclragError(str(e), hint="e.g. --readers hr,finance ('*' for everyone)") from None
        if file is None:
            return cls(default=groups)
        import yaml  # a dependency of the signatures files too; loaded only when a rules file is given

        path = Path(file)
        fix = f"write {path} as a YAML mapping of file patterns to groups, e.g. \"hr/*\": [hr] (docs/guides/access.md)"
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise DeclragError(f"cannot read the readers rules {path}: {e.strerror or e}", hint=fix) from None
        except yaml.YAMLError as e:
            raise DeclragError(f"{path} is not valid YAML: {str(e).splitlines()[0]}", hint=fix) from None
        if not isinstance(raw, dict) or not raw:
            raise DeclragError(f"{path} holds no rules (expected a mapping of file patterns to groups)", hint=fix)
        rules = []
        for pattern, names in raw.items():
            try:
                if not isinstance(pattern, str) or not pattern.strip():
                    raise ValueError(f"{pattern!r} is not a file pattern")
                if not isinstance(names, (str, list)) or not names:
                    raise ValueError(f"rule {pattern!r} names no groups")
                rules.append((pattern.strip(), check_readers(names, f"rule {pattern!r}")))
            except ValueError as e:
                raise DeclragError(f"{path}: {e}", hint=fix) from None
        return cls(tuple(rules), groups, path.resolve().parent, str(path))

    @property
    def given(self) -> bool:
        """Whether this run says anything of readers."""
        return bool(self.rules) or self.default is not None

    def of(self, source: str) -> tuple[str, ...] | None:
        """The readers this run gives a file's documents (the first matching rule, else ``--readers``); None: nothing
        said of it."""
        for pattern, groups in self.rules:
            if self._matches(pattern, source):
                return groups
        return self.default

    def _matches(self, pattern: str, source: str) -> bool:
        path = Path(source)
        if pattern.startswith("/"):
            return fnmatch.fnmatchcase(path.as_posix(), pattern)
        rel = path.relative_to(self.base) if path.is_relative_to(self.base) else None
        return rel is not None and fnmatch.fnmatchcase(rel.as_posix(), pattern)

    def check(self, sources: Iterable[str]) -> None:
        """Raise `DeclragError` naming the first rule that matches none of ``sources`` (a mistyped pattern would
        leave its files unlabelled without a word)."""
        sources = list(sources)
        for pattern, _ in self.rules:
            if not any(self._matches(pattern, s) for s in sources):
                raise DeclragError(f"readers rule {pattern!r} in {self.origin} matches no file indexed here",
                                   hint=f"patterns are matched against paths relative to {self.base} (or absolute, "
                                        "starting with /); fix the pattern or remove the rule")

    def label(self, doc: Document, before: tuple[str, ...] | None) -> Document:
        """``doc`` with its readers: its own (a JSONL record's), else this run's for its file, else ``before`` (what
        the store holds for it; None: a new document), else what it was `kept` with, else none."""
        if doc.readers:
            return doc
        readers = self.of(doc.source)
        readers = readers if readers is not None else before if before is not None else self.kept.get(doc.id)
        return replace(doc, readers=readers) if readers else doc
