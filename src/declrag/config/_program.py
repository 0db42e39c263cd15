"""A whole RAG program's settings (`ProgramConfig`): its LM routes and its stages' sections, the sections of
stages registered from elsewhere (`register_section`), and the program's answer mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails

from ..errors import DeclragError
from ._base import DEFAULT_ROUTE, Fusion, Handover, Strict
from ._ingest import AnnConfig, IngestConfig

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
    # how the passages are handed over (`declrag.pipeline.stages.retrieve.hand_over`): ``best-first``, each passage what
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
    copied (`declrag.pipeline.stages.generate`) is never passed on as the answer: ``caught`` says what takes its place,
    the extractive answer (``extract``), one more try with the strict prompt and then the extractive answer
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


#: Config sections of stages declared outside this module, by name (`register_section`): a `ProgramConfig` reads such
#: a section, validated by its class, once the stage's module is imported; without one, its defaults.
SECTIONS: dict[str, type[Strict]] = {}


def register_section(name: str, cls: type[Strict]) -> None:
    """Let `ProgramConfig` read a section of a stage's own settings (`declrag.pipeline.stage_list`).

    Args:
        name: the section's key in a program config (``drop``: ``{drop: {min_score: 0.2}}``).
        cls: the settings' class (a `Strict` model; its defaults are the section's when a config leaves it out).

    Raises:
        ValueError: a field of the program already has that name.
    """
    if name in ProgramConfig.model_fields:
        raise ValueError(f"{name!r} is already a section of ProgramConfig")
    SECTIONS[name] = cls


class ProgramConfig(Strict):
    """A whole RAG program. `declrag compile` writes one; `declrag serve` and `declrag ask` run one. Besides its
    fields, it holds the sections of registered stages (`SECTIONS`); any other key is an error."""

    model_config = ConfigDict(extra="allow", frozen=True)  # extra: only `SECTIONS`' (`_sections`)

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

    @model_validator(mode="wrap")
    @classmethod
    def _sections(cls, data: Any, handler: Any) -> ProgramConfig:
        """Keys beyond the fields: a registered stage's section, validated by its class; anything else refused as
        pydantic refuses an unknown key (``extra_forbidden`` at the key)."""
        if isinstance(data, dict) and (extra := [k for k in data if k not in cls.model_fields]):
            data, errors = dict(data), list[InitErrorDetails]()
            for k in extra:
                if k not in SECTIONS:
                    errors.append(InitErrorDetails(type="extra_forbidden", loc=(k,), input=data[k]))
                elif not isinstance(data[k], SECTIONS[k]):
                    try:
                        data[k] = SECTIONS[k].model_validate(data[k])
                    except ValidationError as e:
                        errors += [InitErrorDetails(type=x["type"], loc=(k, *x["loc"]), input=x["input"],
                                                    ctx=x.get("ctx", {})) for x in e.errors()]  # type: ignore[typeddict-item]
            if errors:
                raise ValidationError.from_exception_data(cls.__name__, errors)
        return handler(data)

    def section(self, name: str) -> Any:
        """The section ``name``: a field's, or a registered stage's (its defaults when unset); None for neither."""
        if name in type(self).model_fields:
            return getattr(self, name)
        given = (self.model_extra or {}).get(name)
        return given if given is not None else SECTIONS[name]() if name in SECTIONS else None

    @model_validator(mode="after")
    def _check_program(self) -> ProgramConfig:
        if self.rerank.mode != "none" and self.rerank.candidates < self.retrieve.k:
            raise ValueError(f"rerank.candidates ({self.rerank.candidates}) must be >= retrieve.k ({self.retrieve.k})")
        return self

    def stage_lm(self, stage: str) -> LMConfig:
        """The LM route of the LM stage ``stage`` (its section's ``lm``; ``condense`` is history's), else ``lm``."""
        return getattr(self.section("history" if stage == "condense" else stage), "lm", None) or self.lm


def with_model(config: ProgramConfig, route: str) -> ProgramConfig:
    """The same program with every LM call routed to ``route``; a model named writes the answer (``generate.mode:
    auto`` becomes ``lm``; a mode the config names stays)."""
    lm = config.lm.model_copy(update={"route": route, "adapter": "auto"})
    upd: dict[str, Any] = {"lm": lm}
    if config.generate.mode == "auto":
        upd["generate"] = config.generate.model_copy(update={"mode": "lm"})
    for name in [*type(config).model_fields, *(config.model_extra or {})]:
        sub = upd.get(name, config.section(name))
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
