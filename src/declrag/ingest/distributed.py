"""Indexing over a Ray cluster: `declrag index --ray ADDRESS` (docs/guides/many-machines.md).

The driver (the process that runs `declrag index`) lists the files, finds what changed (size and modification time
against the store's records, as one process does), opens or creates the store and writes its metadata, once. The
rest is one Ray Data pipeline:

1. **read**: tasks load the files, on any node, a few files a task. A document whose content hash the store already
   holds goes no further (counted unchanged); a file that cannot be loaded is skipped with its reason.
2. **chunk and embed**: an actor pool, one embedder per actor, loaded once: one actor per GPU where the cluster has
   GPUs, else actors as large as its smallest node, the ONNX embedder on that many threads (`sizes`). A batch holds
   whole documents.
3. **write**: to a server store (Weaviate), by the actors, each batch as one upsert of whole documents. Object ids
   are derived from the chunks' ids and an upsert replaces a document's chunks, so a batch Ray runs again (a lost
   node, a restarted actor) writes the very same objects: no duplicate, none missing. To the embedded store (one
   writer), by the driver, each batch as it comes back.

A document's record is written with its chunks, so a job killed midway and run again finds what was written
unchanged and embeds the rest only (`IndexReport.embedded` counts what reached a model).

Checked before any work, each a one-line error: the address answers; every node runs this declrag; every node can
read the paths and reach the store.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import IngestConfig
from ..embed.embedder import Embedder
from ..errors import DeclragError
from ..runtime.about import package_version
from ..stores import connect
from ..types import Chunk, Document
from .chunkers import Chunker
from .loaders import LoadError, Skipped, read_file
from .readers import Readers

FILES_PER_TASK = 8  # files each read task loads
# what each embed call gets (whole documents): large enough that the encoder's length-sorted batches pad little, as
# one process's 2048-chunk calls do (16 documents a call cost a third more CPU a chunk: docs/guides/many-machines.md)
FILES_PER_BATCH = 16
DOCS_PER_BATCH = 256
PROBE_S = 60.0  # how long the checks of the nodes may take


@dataclass
class Plan:
    """What the cluster is asked to do: files to read, each (path, (mtime_ns, size), {id: (content hash, readers)} of
    the documents the store holds from it); or documents already in memory (a golden-set corpus, labelled by the
    driver), each with whether it is new to the store (the unchanged ones left out)."""

    files: list[tuple[str, tuple[int, int], dict[str, tuple[str, tuple[str, ...]]]]] = field(default_factory=list)
    documents: list[tuple[Document, bool]] = field(default_factory=list)
    ocr: bool | None = None  # how the files are read (`declrag.ingest.loaders.read_file`)
    pdf_reader: str = "pdfium"
    readers: Readers = field(default_factory=Readers)  # how the files' documents are labelled, as on the driver


@dataclass
class Batch:
    """One batch done: how many files or documents it took (``items``), what it indexed (documents new and
    changed, chunks, texts embedded), what its read found (documents unchanged, files skipped with the reason, the
    ids of each file's documents); and, for the driver to write (the embedded store), its documents, chunks, vectors
    and file stamps (None: the actor wrote them)."""

    items: int
    added: int
    updated: int
    chunks: int
    embedded: int
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    parts: list[Skipped] = field(default_factory=list)  # records and pages skipped in files that were read
    found: dict[str, list[str]] = field(default_factory=dict)
    relabel: dict[str, tuple[str, ...]] = field(default_factory=dict)  # unchanged documents, their new readers
    write: tuple[list[Document], list[Chunk], np.ndarray, dict[str, tuple[int, int]]] | None = None


def resolve_address(address: str | None) -> str:
    """``--ray`` as given: an address (host:port, or ray://host:port for Ray's client), or ``auto``:
    ``$RAY_ADDRESS`` where it is set, else the cluster this machine is a node of (as Ray reads ``auto``)."""
    got = (address or "").strip()
    if not got:
        raise DeclragError("--ray needs an address", hint="give the head node's host:port (ray start --head prints "
                                                          "it), or auto")
    return os.environ.get("RAY_ADDRESS", "").strip() or got if got == "auto" else got


def _ray():
    try:
        import ray
    except ImportError:
        raise DeclragError("indexing over Ray needs Ray on this machine",
                           hint="pip install 'declrag[ray]' (and the same on every node)") from None
    return ray


def _answers(address: str, timeout: float = 3.0) -> bool:
    """A TCP connection to host:port opens (Ray's own client waits 35 s, and may end the process, on a dead one)."""
    if address == "auto" or "://" in address:
        return True  # auto: Ray finds it; ray://: the client server, checked by ray.init itself
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise DeclragError(f"--ray {address!r} is not an address", hint="use host:port, e.g. 10.0.0.5:6379, or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout).close()
        return True
    except OSError:
        return False


def preflight(address: str | None, actors: int | None = None) -> str:
    """The checks that need no Ray (a second of imports): ``actors`` is at least 1, the address is one and answers.
    Returns the address (`resolve_address`)."""
    if actors is not None and actors < 1:
        raise DeclragError(f"--ray-actors must be at least 1, not {actors}", hint="e.g. --ray-actors 4")
    where = resolve_address(address)
    if not _answers(where):
        raise DeclragError(f"no Ray cluster answers at {where}",
                           hint="start one (ray start --head, or scripts/ray.sh), or check --ray / $RAY_ADDRESS")
    return where


def start(address: str) -> None:
    """Connect this process to the cluster at ``address`` (a no-op when connected)."""
    ray = _ray()
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=True)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise DeclragError(f"cannot join the Ray cluster at {address}: {str(e).splitlines()[0]}",
                           hint="check the address, and that the cluster runs Ray 2.60 on this Python") from None


def _probe(paths: list[str], store: tuple[str, int] | None) -> dict[str, Any]:
    """Run on one node: what it has of what the job needs."""
    from declrag.runtime.about import package_version  # on the node: whether it has declrag at all is what is asked

    out: dict[str, Any] = {"version": package_version("declrag"), "store": True,
                           "unreadable": [p for p in paths if not os.path.exists(p)]}
    if store is not None:
        try:
            socket.create_connection(store, 5).close()
        except OSError:
            out["store"] = False
    return out


def check_nodes(paths: Sequence[str], store: tuple[str, int] | None) -> None:
    """Every alive node runs this declrag, can read ``paths`` and reach ``store`` (host, port)."""
    mine = package_version("declrag")
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    probe = ray.remote(num_cpus=0, max_retries=0)(_probe)
    refs = {n["NodeManagerAddress"] + " " + n["NodeID"][:8]: probe.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(list(paths), store)
        for n in nodes}
    for where, ref in refs.items():
        try:
            got = ray.get(ref, timeout=PROBE_S)
        except Exception as e:  # noqa: BLE001 - a worker that cannot import declrag, or a node that died
            text = str(e)
            if "No module named 'declrag'" in text or "ModuleNotFoundError" in text:
                raise DeclragError(f"the Ray node {where} cannot import declrag",
                                   hint=f"install declrag {mine} (pip install 'declrag[ray]') on "
                                        "every node of the cluster") from None
            raise DeclragError(f"the Ray node {where} failed a check: {text.strip().splitlines()[-1][:200]}",
                               hint="see the node's logs (ray logs), or run without --ray") from None
        if got["version"] != mine:
            raise DeclragError(f"the Ray node {where} runs declrag {got['version']}, this machine {mine}",
                               hint="install the same declrag version on every node")
        if got["unreadable"]:
            raise DeclragError(f"the Ray node {where} cannot read {got['unreadable'][0]}",
                               hint="put the files on storage every node mounts at the same path, or run without "
                                    "--ray")
        if not got["store"] and store is not None:
            raise DeclragError(f"the Ray node {where} cannot reach the store at {store[0]}:{store[1]}",
                               hint="give the store by an address every node can reach (not localhost on a "
                                    "cluster of several machines)")


# ------------------------------------------------------------------------------------------------ the stages
def _item(path: str = "", stamp: tuple[int, int] = (0, -1), docs: list | None = None) -> dict[str, Any]:
    """What the embed stage gets for one file (or one document already in memory: no path, no stamp): its documents
    to index, each with whether it is new, and what the read found (documents unchanged, ids, a skip reason)."""
    return {"path": path, "stamp": stamp, "docs": docs or [], "unchanged": 0, "skipped": None, "parts": [],
            "found": [], "relabel": {}}


def _read(batch: dict[str, np.ndarray], ocr: bool | None = None, pdf_reader: str = "pdfium",
          readers: Readers | None = None) -> dict[str, np.ndarray]:
    """Ray task: load each file of the batch (read as `declrag.ingest.loaders.read_file` reads with ``ocr`` and
    ``pdf_reader``), its documents labelled by ``readers`` as the driver labels them; one row per file with its
    documents that changed, and the unchanged ones whose readers change (pickled)."""
    readers = readers or Readers()
    rows: list[bytes] = []
    for path, stamp, known in zip(batch["path"], batch["stamp"], batch["known"]):
        item = _item(str(path), (int(stamp[0]), int(stamp[1])))
        held = pickle.loads(known)
        try:
            got = read_file(Path(str(path)), ocr, pdf_reader)
            docs, item["parts"] = got.documents, got.skipped
        except LoadError as e:
            item["skipped"] = e.reason
            docs = []
        for d in docs:
            item["found"].append(d.id)
            before = held.get(d.id)  # (hash, readers) the store holds
            d = readers.label(d, before[1] if before is not None else None)
            if before is not None and before[0] == d.hash:
                item["unchanged"] += 1
                if before[1] != d.readers:
                    item["relabel"][d.id] = d.readers
            else:
                item["docs"].append((d, before is None))
        rows.append(pickle.dumps(item))
    return {"item": np.array(rows, dtype=object)}


class _Embed:
    """Ray actor: chunks and embeds whole documents with one embedder, loaded once; writes them too when the store
    is a server (``store`` its URI)."""

    def __init__(self, ingest: str, store: str | None):
        self.ingest = IngestConfig.model_validate_json(ingest)
        self.embedder = Embedder(self.ingest.embedder)
        embed = self.embedder.embed_documents if self.ingest.chunker.name == "semantic" else None
        self.chunker = Chunker(self.ingest.chunker, self.embedder.tokens, embed, self.ingest.context,
                               self.embedder.covers)
        self.store = None
        if store is not None:
            self.store = connect(store)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        items = [pickle.loads(b) for b in batch["item"]]
        docs = [(d, new) for it in items for d, new in it["docs"]]
        chunks = [c for d, _ in docs for c in self.chunker(d)]
        before = self.embedder.calls
        vectors = (np.asarray(self.embedder.embed_documents([c.searched for c in chunks]), dtype=np.float32)
                   if chunks else np.zeros((0, 0), np.float32))
        stats = {it["path"]: it["stamp"] for it in items if it["stamp"][1] >= 0}
        out = Batch(len(items), sum(new for _, new in docs), sum(not new for _, new in docs), len(chunks),
                    self.embedder.calls - before, sum(it["unchanged"] for it in items),
                    [(it["path"], it["skipped"]) for it in items if it["skipped"]],
                    [p for it in items for p in it.get("parts", [])],
                    {it["path"]: it["found"] for it in items if it["path"] and not it["skipped"]},
                    {d: r for it in items for d, r in it.get("relabel", {}).items()})
        documents = [d for d, _ in docs]
        if self.store is None:
            out.write = (documents, chunks, vectors, stats)
        elif documents:
            self.store.upsert(documents, chunks, vectors, stats)
        return {"batch": np.array([pickle.dumps(out)], dtype=object)}


@dataclass
class Cluster:
    """Where `declrag.ingest.indexer.Indexer` sends its work: the Ray cluster at ``address`` (joined by `start`),
    ``actors`` embedders (None: `sizes`), and the store's URI when it is a server the actors write to (None: the
    driver writes)."""

    address: str
    actors: int | None = None
    store_uri: str | None = None

    def run(self, plan: Plan, ingest: IngestConfig) -> Iterator[Batch]:
        ray = _ray()
        actors, cpus, gpus = sizes([n["Resources"] for n in ray.nodes() if n.get("Alive")], self.actors)
        return run(plan, ingest, self.store_uri, actors, cpus, gpus)


def sizes(nodes: Sequence[dict[str, float]], actors: int | None = None) -> tuple[int, int, float]:
    """(actors, CPUs each, GPUs each) for a cluster of ``nodes`` (each its resources). With GPUs: one actor per GPU.
    Else actors as large as the smallest node, so that a node of C cores runs one embedder on C threads, as one
    process would (an actor's ONNX threads are its CPUs); ``actors`` given: the CPUs shared among them."""
    gpus = int(sum(n.get("GPU", 0) for n in nodes))
    if gpus and actors is None:
        return gpus, 1, 1.0
    total = int(sum(n.get("CPU", 0) for n in nodes)) or 1
    smallest = int(min((n.get("CPU", 0) for n in nodes if n.get("CPU", 0) >= 1), default=1))
    if actors is None:
        return max(1, total // smallest), smallest, 0.0
    return actors, max(1, min(smallest, total // actors)), 1.0 if gpus >= actors else 0.0


def run(plan: Plan, ingest: IngestConfig, store_uri: str | None, actors: int, cpus: int = 1, gpus: float = 0.0
        ) -> Iterator[Batch]:
    """The batches of ``plan``, embedded (and written, when ``store_uri`` names a server store) over the cluster
    this process joined (`start`), as they finish."""
    _ray()
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.ERROR)  # the indexer shows its own progress
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ds: ray.data.Dataset
    if plan.files:  # read on the cluster; reading is light beside embedding: it takes no CPU of the actors'
        rows = [{"path": p, "stamp": list(s), "known": pickle.dumps(k)} for p, s, k in plan.files]
        ds = ray.data.from_items(rows, override_num_blocks=max(1, -(-len(rows) // FILES_PER_TASK)))
        ds = ds.map_batches(_read, batch_size=FILES_PER_TASK, batch_format="numpy", num_cpus=0,
                            fn_kwargs={"ocr": plan.ocr, "pdf_reader": plan.pdf_reader, "readers": plan.readers})
        per_batch = FILES_PER_BATCH
    else:
        rows = [{"item": pickle.dumps(_item(docs=[(d, new)]))} for d, new in plan.documents]
        ds = ray.data.from_items(rows, override_num_blocks=max(1, -(-len(rows) // DOCS_PER_BATCH)))
        per_batch = DOCS_PER_BATCH
    ds = ds.map_batches(_Embed, fn_constructor_args=(ingest.model_dump_json(), store_uri), batch_size=per_batch,
                        batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=cpus,
                        num_gpus=gpus or None,
                        max_restarts=-1, max_task_retries=-1)
    for got in ds.iter_batches(batch_size=None, batch_format="numpy"):
        for blob in got["batch"]:
            yield pickle.loads(blob)
