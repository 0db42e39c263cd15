"""The Weaviate backend: a store is a collection on a Weaviate server, searched inside the server.

``weaviate://host:port/Collection?grpc=50051`` (``weaviates://`` for TLS; a cluster's nodes comma-separated in
the address). The URI's options, its vector index settings and failover are described in
docs/guides/weaviate.md; `Target` parses them. Searches send one gRPC ``Search`` request each (`wire`); writes,
counts and schema calls go through the client library.

What is stored: collection ``Collection`` holds the chunks (own vectors, BM25 k1 1.2 / b 0.75 on one property laid
out by the store's format: `layout.Layout`, declrag's own keyword tokens from format 5) and the `StoreMeta` as JSON
in its description;
``Collection_docs`` the document records and texts. Objects have fixed UUIDs (UUID5 of the chunk or document
id), so writing one twice replaces it.

Guarantees (Weaviate has no multi-object transactions): an upsert writes the new chunks, then deletes the
stale chunks of documents indexed before, then the document records, last; a crash part-way leaves those
documents with their old record, so the next run redoes them and no chunk is ever duplicated (a document
first written by a crashed run and edited before the next keeps the crashed run's extra chunks; ``declrag
index --rebuild`` clears that). Searches running during an upsert may see a document half-replaced.

Keyword search is eventually consistent: BM25 can miss objects written in the last minute, until the server
flushes its memtables (PERSISTENCE_MEMTABLES_FLUSH_DIRTY_AFTER_SECONDS, 60 s by default). `settle` waits that
long after this handle's last write; compile, eval and the benchmarks call it before they measure.
"""

from ._store import WeaviateStore
from .target import Target

__all__ = ["Target", "WeaviateStore"]
