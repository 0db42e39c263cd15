"""The callers of `declrag bench soak --callers N`: a copy of the store whose documents each one group may read, a keys
file of callers with overlapping groups, and the check that no response names a document its caller may not read."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

DOC_IDS = re.compile(r'"doc_id":\s*"([^"]+)"')  # in JSON bodies (orjson: no space) and server-sent events' data


@dataclass(frozen=True)
class Callers:
    """The callers of a soak with ``--keys``: each one's key, and the documents (as clients see their ids) each may
    read."""

    keys: list[str]
    readable: list[frozenset[str]]

    def leaked(self, n: int, body: bytes) -> int:
        """How many documents caller ``n``'s response names that they may not read."""
        return sum(d not in self.readable[n] for d in DOC_IDS.findall(body.decode("utf-8", "replace")))


def labelled(store: str, folder: Path, n: int) -> tuple[str, Path, Callers]:
    """A copy of the embedded ``store`` in ``folder`` whose documents are each readable by one of ``n`` groups, in
    turn (g0, g1, ...), and a keys file of ``n`` callers, caller i of groups i and i+1: (the copy, the keys file,
    the callers with what each may read, as clients see the documents' ids)."""
    from declrag.access import KeysFile
    from declrag.payloads import PublicPaths
    from declrag.stores import open_store

    copy = folder / "store"
    shutil.copytree(store, copy)
    st, _ = open_store(str(copy), create=False)
    group = {d: i % n for i, d in enumerate(sorted(st.documents()))}
    st.relabel({d: [f"g{g}"] for d, g in group.items()})
    paths = PublicPaths.of_store(st)
    st.close()
    keys_file = KeysFile(folder / "keys.yaml")
    keys = [keys_file.add(f"caller{i}", ",".join(sorted({f"g{i}", f"g{(i + 1) % n}"}))) for i in range(n)]
    readable = [frozenset(paths.relative(d) for d, g in group.items() if g in (i, (i + 1) % n)) for i in range(n)]
    return str(copy), folder / "keys.yaml", Callers(keys, readable)
