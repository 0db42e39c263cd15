"""The store contract: one pytest suite every `Store` backend must pass.

A backend's test module subclasses `StoreContract` and supplies one fixture, ``make_store``: a callable
returning a new, empty store. Everything else (data, expectations) lives here, so all backends are held
to the same behaviour, including Weaviate's hybrid semantics, computed independently below.

Tests that need more than the protocol name a capability (`Store.capabilities`) and are skipped, saying
so, on a backend without it: ``leg_scores`` (hybrid hits carry each leg's raw score).
"""

from __future__ import annotations

import numpy as np
import pytest

from ..config import IngestConfig
from ..errors import DeclragError
from ..stores.base import Filter, Store, StoreMeta
from ..stores.fusion import fuse, object_uuid
from ..text.keywords import STOPWORDS_EN, tokenize
from ..text.stopwords import query_terms
from ..types import Chunk, Document
from ._fakes import HashEmbedder

TEXTS = {
    "paris": ["Paris is the capital of France.", "The Eiffel Tower stands in Paris.", "France borders Spain."],
    "berlin": ["Berlin is the capital of Germany.", "The Brandenburg Gate is in Berlin."],
    "rome": ["Rome is the capital of Italy.", "The Colosseum is an amphitheatre in Rome.", "Rome has many fountains."],
    "tokyo": ["Tokyo is the capital of Japan.", "Mount Fuji can be seen from Tokyo on clear days."],
}

# one document each in scripts BM25 word tokenization fails: no spaces between words, or vowel signs inside words
SCRIPTS = {
    "zh-library": "图书馆每天早上八点开门，晚上十点关门。周末的开放时间缩短两个小时。",
    "zh-pool": "游泳馆要求所有游客佩戴泳帽，儿童必须由成人陪同进入深水区。",
    "ja-tower": "東京タワーは1958年に完成した電波塔です。",
    "hi-language": "हिन्दी भारत की राजभाषा है और देवनागरी लिपि में लिखी जाती है।",
    "th-capital": "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
}
SCRIPT_QUERIES = [("游泳馆要戴什么？", "zh-pool"), ("图书馆几点开门", "zh-library"),
                  ("東京タワーはいつ完成した", "ja-tower"), ("राजभाषा क्या है", "hi-language"),
                  ("เมืองหลวงของไทย", "th-capital")]


# each document's readers: two groups, one shared, everyone, and one unlabelled
READERS = {"paris": ("hr",), "berlin": ("eng", "hr"), "rome": ("*",), "tokyo": ()}


def corpus(emb: HashEmbedder, pages: bool = True) -> tuple[list[Document], list[Chunk], np.ndarray]:
    docs, chunks = [], []
    for i, (name, sents) in enumerate(TEXTS.items()):
        text = " ".join(sents)
        doc = Document(id=name, text=text, source=f"/data/{name}.txt", title=name.title(),
                       page=i + 1 if pages else None, readers=READERS[name])
        docs.append(doc)
        pos = 0
        for j, s in enumerate(sents):
            start = text.index(s, pos)
            chunks.append(Chunk(id=f"{name}#{j}", doc_id=name, text=s, start=start, end=start + len(s), position=j,
                                source=doc.source, title=doc.title, page=doc.page, readers=doc.readers))
            pos = start + len(s)
    return docs, chunks, emb.embed_documents([c.text for c in chunks])


def requires(store: Store, capability: str) -> None:
    if capability not in store.capabilities:
        pytest.skip(f"{type(store).__name__} does not offer {capability!r}")


def bm25_reference(texts: dict[str, str], query: str, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """BM25 as Weaviate computes it, from first principles (no library)."""
    toks = {i: tokenize(t) for i, t in texts.items()}
    n, avg = len(toks), sum(map(len, toks.values())) / len(toks)
    out: dict[str, float] = {}
    for term in query_terms(query):
        df = sum(term in t for t in toks.values())
        if not df:
            continue
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, t in toks.items():
            tf = t.count(term)
            if tf:
                out[i] = out.get(i, 0.0) + idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(t) / avg))
    return out


class StoreContract:
    @pytest.fixture
    def emb(self) -> HashEmbedder:
        return HashEmbedder()

    @pytest.fixture
    def store(self, make_store, emb) -> Store:
        s = make_store()
        s.create(StoreMeta(backend=s.backend))
        docs, chunks, vecs = corpus(emb)
        s.upsert(docs, chunks, vecs, {d.source: (1, len(d.text)) for d in docs})
        return s

    # -- writes and reads ------------------------------------------------------------------------------
    def test_is_a_store(self, store):
        assert isinstance(store, Store)

    def test_count_get_documents(self, store):
        assert store.count() == 10
        got = store.get(["rome#1", "nope", "paris#0"])
        assert [c.id for c in got] == ["rome#1", "paris#0"]
        assert got[0].text == "The Colosseum is an amphitheatre in Rome." and got[0].page == 3
        docs = store.documents()
        assert set(docs) == set(TEXTS) and docs["rome"].chunks == 3 and docs["rome"].size > 0
        assert store.document_texts(["berlin"])["berlin"].startswith("Berlin is the capital")

    def test_upsert_replaces_a_documents_chunks(self, store, emb):
        doc = Document(id="rome", text="Rome was not built in a day.", source="/data/rome.txt", title="Rome", page=3)
        c = Chunk(id="rome#0", doc_id="rome", text=doc.text, start=0, end=len(doc.text), position=0,
                  source=doc.source, title="Rome", page=3)
        store.upsert([doc], [c], emb.embed_documents([c.text]))
        assert store.count() == 8
        assert store.count({"doc_id": "rome"}) == 1
        assert store.get(["rome#2"]) == []
        assert store.documents()["rome"].hash == doc.hash

    def test_verify_finds_every_chunk_on_every_copy(self, store):
        check = store.verify()
        assert check.ok and check.expected == 10 and check.repaired == 0, check
        assert check.copies and set(check.copies.values()) == {10}, check

    def test_metadata_lives_in_the_store(self, make_store):
        s = make_store()
        assert s.read_meta() is None
        meta = StoreMeta(backend=s.backend, metric="cosine",
                         ingest=IngestConfig.model_validate({"chunker": {"chunk_size": 99, "overlap": 9}}))
        s.create(meta)
        assert s.read_meta() == meta and s.uri
        with pytest.raises(DeclragError, match="not a declrag store"):
            s.create(meta)
        s.drop()
        assert s.read_meta() is None

    def test_upsert_twice_is_idempotent(self, store, emb):
        docs, chunks, vecs = corpus(emb)
        store.upsert(docs, chunks, vecs)
        assert store.count() == 10 and len(store.documents()) == 4
        assert [h.chunk.id for h in store.keyword_search("Colosseum", 10)] == ["rome#1"]

    def test_delete(self, store):
        assert store.delete(["paris", "tokyo"]) == 5
        assert store.count() == 5 and set(store.documents()) == {"berlin", "rome"}
        assert store.keyword_search("Eiffel Tower") == []

    # -- keyword ---------------------------------------------------------------------------------------
    def test_keyword_scores_are_weaviate_bm25(self, store):
        texts = {c: t for name, sents in TEXTS.items() for c, t in ((f"{name}#{j}", s) for j, s in enumerate(sents))}
        query = "What is the capital of Italy?"
        ref = bm25_reference(texts, query)
        hits = store.keyword_search(query, limit=10)
        assert [h.chunk.id for h in hits] == sorted(ref, key=lambda i: (-ref[i], object_uuid(i)))
        ratios = [h.score / ref[h.chunk.id] for h in hits]  # equal up to a constant factor such as (k1 + 1)
        assert ratios == pytest.approx([ratios[0]] * len(ratios), rel=1e-4)

    def test_keyword_drops_stopwords_from_the_query_only(self, store):
        assert "the" in STOPWORDS_EN
        assert store.keyword_search("the of is") == []  # all stopwords: nothing to match
        assert store.keyword_search("the Colosseum")[0].chunk.id == "rome#1"

    def test_keyword_tokenizes_on_non_alphanumerics(self, store):
        assert store.keyword_search("colosseum!!")[0].chunk.id == "rome#1"
        assert store.keyword_search("BRANDENBURG-gate")[0].chunk.id == "berlin#1"

    def test_keyword_search_in_every_script(self, make_store, emb):
        """Scripts without spaces (Chinese, Japanese, Thai) and words with combining marks (Hindi) are found by
        their words, ranked as BM25 over declrag's tokens (`declrag.text.keywords`) says, on every backend."""
        s = make_store()
        s.create(StoreMeta(backend=s.backend))
        docs = [Document(id=k, text=t, source=f"/data/{k}.txt") for k, t in SCRIPTS.items()]
        chunks = [Chunk(id=f"{d.id}#0", doc_id=d.id, text=d.text, start=0, end=len(d.text), position=0,
                        source=d.source, language=d.id.split("-")[0]) for d in docs]
        s.upsert(docs, chunks, emb.embed_documents([c.text for c in chunks]))
        texts = {c.id: c.text for c in chunks}
        for query, want in SCRIPT_QUERIES:
            ref = bm25_reference(texts, query)
            hits = s.keyword_search(query, 10)
            assert [h.chunk.id for h in hits] == sorted(ref, key=lambda i: (-ref[i], object_uuid(i))), query
            assert hits[0].chunk.id == f"{want}#0", query
        assert [h.chunk.id for h in s.keyword_search("图书馆 東京", 10, {"language": "ja"})] == ["ja-tower#0"]
        assert {h.chunk.language for h in s.keyword_search("图书馆 游泳馆", 10)} == {"zh"}

    # -- vector ----------------------------------------------------------------------------------------
    def test_vector_search_ranks_by_cosine(self, store, emb):
        q = emb.embed_query("Colosseum amphitheatre Rome")
        hits = store.vector_search(q, limit=3)
        docs, chunks, vecs = corpus(emb)
        sims = vecs @ q
        expected = [chunks[i].id for i in np.argsort(-sims)[:3]]
        assert [h.chunk.id for h in hits] == expected
        assert hits[0].score >= hits[1].score >= hits[2].score

    # -- filters ---------------------------------------------------------------------------------------
    @pytest.mark.parametrize("where, ids", [
        ({"doc_id": "rome"}, {"rome#0", "rome#1", "rome#2"}),
        ({"page": {"$gte": 3}}, {"rome#0", "rome#1", "rome#2", "tokyo#0", "tokyo#1"}),
        ({"source": {"$in": ["/data/paris.txt", "/data/tokyo.txt"]}, "position": 0}, {"paris#0", "tokyo#0"}),
        ({"$or": [{"doc_id": "berlin"}, {"id": "rome#2"}]}, {"berlin#0", "berlin#1", "rome#2"}),
        ({"doc_id": {"$nin": ["paris", "rome", "tokyo"]}}, {"berlin#0", "berlin#1"}),
    ])
    def test_filters_apply_to_every_search(self, store, emb, where, ids):
        q = "capital city"
        assert store.count(where) == len(ids)
        for hits in (store.keyword_search(q, 10, where), store.vector_search(emb.embed_query(q), 10, where),
                     store.hybrid_search(q, emb.embed_query(q), 10, 0.5, "relative", where=where)):
            assert {h.chunk.id for h in hits} <= ids
        assert {h.chunk.id for h in store.vector_search(emb.embed_query(q), 10, Filter(where))} == ids

    FILTERS = [
        {"page": {"$ne": 2}}, {"page": {"$nin": [1, 3]}}, {"page": {"$in": [2, 4]}}, {"page": {"$lt": 3}},
        {"page": {"$in": []}}, {"page": {"$nin": []}}, {"doc_id": {"$in": []}, "position": 0},
        {"$or": [{"doc_id": {"$in": []}}, {"page": 1}]}, {"$and": [{"page": {"$nin": []}}, {"position": {"$gte": 1}}]},
        {"title": {"$ne": "Rome"}, "position": {"$lte": 0}}, {"id": {"$in": ["rome#1", "nopage#0", "x"]}},
        {"source": "/data/nopage.txt"}, {"page": {"$gte": -2147483648}},
        {"readers": "hr"}, {"readers": {"$in": ["eng", "*unlabelled"]}}, {"readers": {"$nin": ["hr", "*"]}},
        {"readers": {"$ne": "hr"}, "position": 0}, {"$or": [{"readers": "eng"}, {"page": 3}]}, {"readers": {"$in": []}},
        {"$and": [{"readers": {"$in": ["hr", "*"]}}, {"$or": [{"doc_id": "tokyo"}, {"position": 1}]}]},
    ]

    @pytest.mark.parametrize("where", FILTERS, ids=lambda w: __import__("json").dumps(w))
    def test_filters_mean_what_the_reference_says(self, store, emb, where):
        """Empty lists, chunks without a page, $ne/$nin: every backend agrees with `Filter.matches`."""
        doc = Document(id="nopage", text="A page-less note about capitals.", source="/data/nopage.txt", title="Note")
        c = Chunk(id="nopage#0", doc_id="nopage", text=doc.text, start=0, end=len(doc.text), position=0,
                  source=doc.source, title="Note", page=None)
        store.upsert([doc], [c], emb.embed_documents([c.text]))
        docs, chunks, _ = corpus(emb)
        records = [{"id": x.id, "doc_id": x.doc_id, "source": x.source, "title": x.title, "page": x.page,
                    "position": x.position, "readers": x.readers} for x in chunks + [c]]
        f = Filter(where)
        expected = {r["id"] for r in records if f.matches(r)}
        assert store.count(where) == len(expected)
        q = "capital"
        assert {h.chunk.id for h in store.vector_search(emb.embed_query(q), 20, where)} == expected
        assert {h.chunk.id for h in store.keyword_search(q, 20, where)} <= expected
        assert {h.chunk.id for h in store.hybrid_search(q, emb.embed_query(q), 20, 0.5, where=where)} == expected

    # -- readers ---------------------------------------------------------------------------------------
    def test_readers_are_kept_on_chunks_and_records(self, store):
        assert [c.readers for c in store.get(["berlin#1", "rome#0", "tokyo#0"])] == [("eng", "hr"), ("*",), ()]
        assert {d: r.readers for d, r in store.documents().items()} == READERS

    def test_a_readers_filter_still_gives_k_passages(self, store, emb):
        """The filter is part of the search: a caller who may read 5 chunks asks for 4 and gets 4, theirs."""
        where, q = {"readers": {"$in": ["hr"]}}, "Tokyo Rome Paris Berlin France capital"
        for hits in (store.vector_search(emb.embed_query(q), 4, where), store.keyword_search(q, 4, where),
                     store.hybrid_search(q, emb.embed_query(q), 4, 0.5, where=where)):
            assert len(hits) == 4 and {h.doc_id for h in hits} <= {"paris", "berlin"}

    def test_relabel_moves_readers_and_embeds_nothing(self, store, emb):
        q = emb.embed_query("capital of France")
        before = {h.chunk.id: h.score for h in store.vector_search(q, 10)}
        assert store.relabel({"paris": ("fin",), "berlin": (), "nowhere": ("x",)}) == 5
        assert store.count({"readers": "fin"}) == 3 and store.count({"readers": "hr"}) == 0
        assert store.count({"readers": "*unlabelled"}) == 4  # berlin's two, tokyo's two
        assert store.get(["paris#2"])[0].readers == ("fin",) and store.documents()["berlin"].readers == ()
        assert {h.chunk.id: h.score for h in store.vector_search(q, 10)} == pytest.approx(before)
        assert store.get(["paris#0"])[0].text == "Paris is the capital of France."
        assert store.relabel({"paris": ("fin",)}) == 3 and store.count({"readers": "fin"}) == 3  # idempotent

    def test_filter_values_out_of_range_are_refused(self):
        for bad in ({"page": {"$gt": 2 ** 63}}, {"page": {"$in": [2 ** 64]}}, {"position": -(2 ** 40)}):
            with pytest.raises(DeclragError, match="between"):
                Filter(bad)

    # -- hybrid ----------------------------------------------------------------------------------------
    @pytest.mark.parametrize("fusion", ["relative", "ranked"])
    @pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 0.8, 1.0])
    def test_hybrid_is_fusion_of_the_legs(self, store, emb, alpha, fusion):
        q = "capital of Italy with an amphitheatre"
        v = emb.embed_query(q)
        kw = [(h.chunk.id, h.score) for h in store.keyword_search(q, 100)]
        vec = [(h.chunk.id, h.score) for h in store.vector_search(v, 100)]
        expected = fuse(kw, vec, alpha, fusion, limit=5)
        got = store.hybrid_search(q, v, 5, alpha, fusion)
        assert [h.chunk.id for h in got] == [k for k, _ in expected]
        assert [h.score for h in got] == pytest.approx([s for _, s in expected], rel=1e-5)

    def test_hybrid_alpha_extremes_are_single_legs(self, store, emb):
        """alpha 0 is the keyword leg, alpha 1 the vector leg, each as fetched for fusion (100 candidates),
        cut to the limit. (A leg searched with the limit itself can differ at a tie across the cut: Weaviate's
        BM25 keeps the earlier-written object there.)"""
        q = "Tokyo Japan capital"
        v = emb.embed_query(q)
        ids = lambda hits: [h.chunk.id for h in hits]  # noqa: E731
        assert ids(store.hybrid_search(q, v, 4, 0.0)) == ids(store.keyword_search(q, 100))[:4]
        assert ids(store.hybrid_search(q, v, 4, 1.0)) == ids(store.vector_search(v, 100))[:4]

    def test_hybrid_reports_leg_scores(self, store, emb):
        requires(store, "leg_scores")
        q = "Eiffel Tower"
        hit = store.hybrid_search(q, emb.embed_query(q), 1)[0]
        assert hit.chunk.id == "paris#1" and set(hit.scores) == {"keyword", "vector"}

    def test_empty_store_returns_nothing(self, make_store, emb):
        s = make_store()
        s.create(StoreMeta(backend=s.backend))
        assert s.count() == 0 and s.keyword_search("x") == [] and s.documents() == {}
        assert s.hybrid_search("x", emb.embed_query("x"), 3) == []
        s.warm_up()  # nothing to load yet: no error

    # -- lifecycle ----------------------------------------------------------------------------------------
    def test_warm_up_then_search_and_close_as_a_context_manager(self, store, emb):
        q = "Eiffel Tower"
        before = [(h.chunk.id, h.score) for h in store.hybrid_search(q, emb.embed_query(q), 3)]
        store.warm_up()
        store.warm_up()  # idempotent
        assert [(h.chunk.id, h.score) for h in store.hybrid_search(q, emb.embed_query(q), 3)] == before
        closed = []
        real_close = store.close
        store.close = lambda: closed.append(1) or real_close()
        with store as same:
            assert same is store and not closed
        assert closed == [1]
        with pytest.raises(RuntimeError), store:  # an error inside the block closes it too, and propagates
            raise RuntimeError("inside")
        assert closed == [1, 1]
