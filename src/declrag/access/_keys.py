"""The keys file: callers' API keys, each with a name and groups, kept as the key's SHA-256 (never the key).

    # declrag callers (`declrag keys add NAME --groups g1,g2 --file FILE` prints a new key once)
    keys:
      - name: alice
        groups: [hr, staff]
        sha256: 3b1f...64 hex digits

A key is at least `MIN_KEY_CHARS` characters of visible ASCII (`declrag keys add` makes 43 random ones), so its SHA-256
is as hard to invert as the key is to guess; a server compares the hash of the key sent with the hashes here.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DeclragError
from ..inputs import api_key_problem
from ..types import check_readers
from ._principals import Principal

MIN_KEY_CHARS = 32
_HEX = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[\w.@+-]{1,128}")


def key_hash(key: str) -> str:
    """The SHA-256 of a key, as the keys file holds it (64 lower-case hex digits)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class _Entry:
    name: str
    groups: tuple[str, ...]
    sha256: str


class KeysFile:
    """The callers of a keys file (`load`), looked up by the key they send (`principal`)."""

    def __init__(self, path: str | Path, entries: list[_Entry] | None = None):
        self.path, self.entries = Path(path), list(entries or [])
        self._by_hash = {e.sha256: e for e in self.entries}

    @classmethod
    def load(cls, path: str | Path, missing_ok: bool = False) -> KeysFile:
        """Read and check a keys file. Raises `DeclragError` naming the file, the entry and the fix: a file missing
        (unless ``missing_ok``: then no callers), not YAML, an entry with a key in clear, a hash that is not 64 hex
        digits, a name or a hash twice, a caller without groups."""
        import yaml  # with the signatures files' parser, loaded when a keys file is read

        path = Path(path)
        fix = f"make {path} with `declrag keys add NAME --groups g1,g2 --file {path}` (docs/guides/access.md)"
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            if missing_ok:
                return cls(path)
            raise DeclragError(f"no keys file at {path}", hint=fix) from None
        except OSError as e:
            raise DeclragError(f"cannot read the keys file {path}: {e.strerror or e}", hint=fix) from None
        except yaml.YAMLError as e:
            raise DeclragError(f"the keys file {path} is not valid YAML: {str(e).splitlines()[0]}", hint=fix) from None
        items = raw.get("keys") if isinstance(raw, dict) else None
        if not isinstance(items, list):
            raise DeclragError(f"the keys file {path} holds no 'keys:' list", hint=fix)
        entries = [cls._entry(path, i, item, fix) for i, item in enumerate(items, 1)]
        for field in ("name", "sha256"):
            seen: dict[str, int] = {}
            for i, entry in enumerate(entries, 1):
                v = getattr(entry, field)
                if v in seen:
                    what = f"name {v!r}" if field == "name" else "key (the same sha256)"
                    raise DeclragError(f"the keys file {path}: entries {seen[v]} and {i} have the same {what}",
                                       hint="remove one (`declrag keys rm NAME`) and add it again with its own key")
                seen[v] = i
        return cls(path, entries)

    @staticmethod
    def _entry(path: Path, i: int, item: Any, fix: str) -> _Entry:
        where = f"the keys file {path}, entry {i}"
        if not isinstance(item, dict):
            raise DeclragError(f"{where} is not a mapping of name, groups and sha256", hint=fix)
        if "key" in item:
            raise DeclragError(f"{where} holds a key in clear; keys are kept as their SHA-256 only",
                               hint=f"remove the entry and add it with `declrag keys add` (--key to keep that key), "
                                    f"which writes its hash to {path}")
        name, groups, digest = item.get("name"), item.get("groups"), item.get("sha256")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise DeclragError(f"{where}: name {name!r} is not 1-128 letters, digits or . @ + - _", hint=fix)
        if not isinstance(digest, str) or not _HEX.fullmatch(digest):
            raise DeclragError(f"{where} ({name}): sha256 is not 64 lower-case hex digits", hint=fix)
        if not isinstance(groups, (list, str)) or not groups:
            raise DeclragError(f"{where} ({name}) has no groups, so it could read nothing of its own",
                               hint=f"give it at least one: `declrag keys add {name} --groups GROUP` after "
                                    f"`declrag keys rm {name}`")
        try:
            got = check_readers(groups, f"{where} ({name}): groups")
        except ValueError as e:
            raise DeclragError(str(e), hint=fix) from None
        if "*" in got:
            raise DeclragError(f"{where} ({name}): '*' is not a group a caller belongs to (everyone reads documents "
                               "labelled '*')", hint="name the caller's real groups")
        return _Entry(name, got, digest)

    def principal(self, key: str) -> Principal | None:
        """The caller whose key this is; None for a key the file does not hold."""
        e = self._by_hash.get(key_hash(key))
        return None if e is None else Principal(e.name, frozenset(e.groups))

    def named(self, name: str) -> Principal | None:
        """The caller of this name (for `declrag ask --as NAME`); None when there is none."""
        e = next((e for e in self.entries if e.name == name), None)
        return None if e is None else Principal(e.name, frozenset(e.groups))

    # -- changes (`declrag keys`) -----------------------------------------------------------------------------------
    def add(self, name: str, groups: str, key: str | None = None) -> str:
        """Add a caller and write the file; returns their key (a new random one unless ``key``). Raises
        `DeclragError` for a name already there, bad groups, or a ``key`` that is short or not visible ASCII."""
        if key is None:
            key = "dr_" + secrets.token_urlsafe(32)
        elif len(key) < MIN_KEY_CHARS or (problem := api_key_problem(key)):
            raise DeclragError(f"that key {'is too short' if len(key) < MIN_KEY_CHARS else problem}: a caller's key "
                               f"is at least {MIN_KEY_CHARS} characters of visible ASCII",
                               hint="leave out --key: declrag makes a random one")
        entry = self._entry(self.path, len(self.entries) + 1,
                            {"name": name, "groups": groups, "sha256": key_hash(key)}, "")
        if self.named(name) is not None:
            raise DeclragError(f"{self.path} already has a caller named {name!r}",
                               hint=f"`declrag keys rm {name} --file {self.path}` first, to give them a new key")
        if entry.sha256 in self._by_hash:
            raise DeclragError("that key is already another caller's", hint="leave out --key: declrag makes one")
        self.entries.append(entry)
        self._by_hash[entry.sha256] = entry
        self.save()
        return key

    def remove(self, name: str) -> None:
        """Remove a caller and write the file; `DeclragError` when there is none of that name."""
        if self.named(name) is None:
            raise DeclragError(f"{self.path} has no caller named {name!r}", hint=f"see `declrag keys list --file "
                                                                                f"{self.path}`")
        self.entries = [e for e in self.entries if e.name != name]
        self._by_hash = {e.sha256: e for e in self.entries}
        self.save()

    def save(self) -> None:
        """Write the file atomically, readable by its owner only."""
        import yaml  # as in `load`

        body = {"keys": [{"name": e.name, "groups": list(e.groups), "sha256": e.sha256} for e in self.entries]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("# declrag callers: keys kept as their SHA-256 (`declrag keys add NAME --groups g1,g2`)\n")
            yaml.safe_dump(body, f, sort_keys=False)
        os.replace(tmp, self.path)
