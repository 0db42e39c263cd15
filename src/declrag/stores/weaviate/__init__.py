"""The Weaviate backend: a store is a collection on a Weaviate server, searched inside the server.

``weaviate://host:port/Collection?grpc=50051`` (``weaviates://`` for TLS on both ports). Query options:
``grpc`` (gRPC port, default 50051), ``api_key_env`` (the environment variable holding the API key, default
``WEAVIATE_API_KEY``; unset means no auth), ``index`` (``flat``, exact, the default, or ``hnsw``), the HNSW
settings ``ef`` (-1, dynamic, or 1-100000), ``ef_construction`` (4-100000) and ``max_connections`` (4-2047),
``compression`` (``pq``, ``bq``, ``sq`` on hnsw, ``bq`` on flat, ``none``), ``replicas`` (replication
factor, default 1), ``shards`` (default 1: BM25 statistics are per shard, so one shard gives the same
scores as the embedded store), ``consistency`` (``ONE``, ``QUORUM``, ``ALL``; the
server's default when absent), ``retries`` (a failed request is retried this many times with backoff,
default 3), ``timeout`` (seconds per request, default 60), ``settle`` (seconds `settle` waits after the last
write, default 65; see below).
A cluster's nodes go in the address, comma-separated (``weaviate://h1:8080,h2:8080,h3:8080/Docs``; ``nodes=``
adds more), ``grpc`` then one port for the first node (the others at the same distance from their REST port)
or one per node; a handle talks to one node and, when it stops answering, goes on with the next (`WeaviateStore.call`).
Creation-time options apply when the store is created. The vector index settings are kept by the server in
the collection's config; those the URI names are compared with it before a handle's first search or write,
and a collection built otherwise is refused by name (`WeaviateStore.index_settings` reads them back).

Searches send one gRPC ``Search`` request each, built here from the protocol's messages, and read the
reply's fields directly; writes, counts and schema calls go through the client library.

What is stored: collection ``Collection`` holds the chunks (own vectors, cosine distance unless the store's
metric says otherwise, BM25 k1 1.2 / b 0.75 on the word-tokenized ``text`` property alone, the English
stopword preset) and the `StoreMeta` as JSON in its description; ``Collection_docs`` holds the document
records and texts. Objects have fixed UUIDs (UUID5 of the chunk or document id), so writing one twice
replaces it.

Guarantees (unlike LanceDB, Weaviate has no multi-object transactions): every object write is atomic and
idempotent. An upsert writes the new chunks, then deletes the stale chunks of documents that were indexed
before (those not among the new ones), then the document records, last. A crash part-way leaves some
documents with new chunks (and possibly their old, stale ones) but their old record, so the next indexing
run sees them as changed and redoes them; no chunk is ever duplicated. One exception: a document first
written by a crashed run and edited before the next one keeps the crashed run's chunks that the new
version does not overwrite (it has no record, so nothing is deleted for it); `declrag index --rebuild`
clears that. Searches running during an upsert may see a document half-replaced.

Hybrid search is Weaviate's own (``alpha`` and ``relative``/``ranked`` fusion passed through). Each leg
brings ``max(QUERY_HYBRID_MAXIMUM_RESULTS, limit)`` candidates (100 on a default server); ``candidates``
above that is honoured by asking for that many results and keeping the best ``limit``; below it, the
server's count applies (the embedded store takes ``candidates`` as given). Per-leg scores are not reported.

Keyword search is eventually consistent: until the server flushes its memtables (after 60 s of a dirty
memtable by default, PERSISTENCE_MEMTABLES_FLUSH_DIRTY_AFTER_SECONDS), BM25 can miss recently written
objects (measured on SQuAD: right after indexing, 67 of 200 queries had another keyword top 10; after
30 s, 1; after 60 s, none). `settle` waits that long after this handle's last write; compile, eval and the
benchmarks call it before they measure anything.
"""

from .store import WeaviateStore
from .target import Target

__all__ = ["Target", "WeaviateStore"]
