"""Readers on a Weaviate store: relabelling documents without embedding them again, and the refusal of a readers
filter by a collection made before readers (format 5 or earlier, `Layout.readers`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ...errors import DeclragError
from ...types import stored_readers
from ..base import Filter, asks_lists
from ._layout import Layout

T = TypeVar("T")


class Handle(Protocol):
    """What relabelling needs of a store handle (`store.WeaviateStore` is one; the store imports this module, so it
    is described here rather than imported)."""

    uri: str
    name: str
    docs_name: str

    @property
    def layout(self) -> Layout: ...
    def call(self, what: str, fn: Callable[[], T]) -> T: ...
    def collection(self, name: str, consistency: str | None = None) -> Any: ...
    def insert(self, name: str, objs: list, consistency: str | None = None) -> None: ...
    def _by_keys(self, name: str, keys: Sequence[str], props: list[str] | None) -> list: ...


def check_filter(store: Handle, where: Filter | None) -> None:
    """Raise `DeclragError` when ``where`` asks about readers and the collection was made before them (it would
    match nothing, silently)."""
    if where is not None and not store.layout.readers and asks_lists(where.tree):
        raise DeclragError(f"store {store.uri} was made before documents had readers (store format 5 or earlier), so "
                           "it cannot tell who may read a passage",
                           hint="index the documents into a new store (declrag index DIR --store URI) to serve them "
                                "to callers with groups")


def relabel(store: Handle, readers: Mapping[str, Sequence[str]], page: int) -> int:
    """`Store.relabel` on Weaviate: each document's chunks read back with their vectors (``page`` chunks or one
    document per request) and written again with the new readers under the same UUIDs, then its record. Returns the
    number of chunks relabelled."""
    from weaviate.classes.data import DataObject
    from weaviate.classes.query import Filter as W

    check_filter(store, Filter({"readers": "*"}))  # a collection made before readers cannot take them
    recs = {o.properties["doc_id"]: o for o in store._by_keys(store.docs_name, list(readers), None)}  # all properties
    todo, n = [d for d in readers if d in recs], 0
    while todo:
        part: list[str] = []
        size = 0
        while todo and (not part or size + int(recs[todo[0]].properties.get("chunks") or 0) <= page):
            size += int(recs[todo[0]].properties.get("chunks") or 0)
            part.append(todo.pop(0))
        if size:
            res = store.call("read", lambda: store.collection(store.name).query.fetch_objects(  # noqa: B023 (now)
                filters=W.by_property("doc_id").contains_any(part), limit=size, include_vector=True))  # noqa: B023
            objs = [DataObject(uuid=o.uuid, vector=o.vector["default"], properties={
                **o.properties, "readers": stored_readers(readers[o.properties["doc_id"]])}) for o in res.objects]
            store.insert(store.name, objs)
            n += len(objs)
        store.insert(store.docs_name, [DataObject(uuid=recs[d].uuid, properties={
            **recs[d].properties, "readers": stored_readers(readers[d])}) for d in part])  # records last
    return n
