"""The base of every settings class (`Strict`: unknown keys are errors, frozen, a digest) and the names the settings
share."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..types import content_hash

DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_ROUTE = "local/smollm2"  # what every LM stage runs on unless told otherwise: SmolLM2-135M, in process
# bump when the chunkers' output changes for the same settings: a store built for a golden set (its digest) is then
# built again; a store of files keeps its unchanged files' chunks (`declrag index --rebuild` makes them anew), but for
# PDFs indexed a document a page, decks a document a slide and workbooks a document a sheet, which `Indexer` reads again
# 3: code blocks and tables are units; what is searched is read (`declrag.text.reading`); 4: a PDF is one document;
# 5: a chunk carries its document's language, and a document in a language the embedding model was not trained on is
# counted in script-neutral tokens (`declrag.text.tokens.ScriptTokens`); 6: a deck and a workbook are one document
# (their slides pages, their sheets sections), a window never shrinks against a table line longer than a window, and a
# chunk that runs into later sections names the first and the last
CHUNKING_VERSION = 6

ChunkerName = Literal["fixed", "recursive", "sentence", "semantic", "parent-child"]
Fusion = Literal["relative", "ranked"]
#: How a search's passages are handed over (`declrag.pipeline.stages.retrieve.hand_over`).
Handover = Literal["best-first", "joined", "merge", "none"]
Metric = Literal["cosine", "dot", "l2"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def digest(self) -> str:
        """A stable hash of the settings (for content-addressed caches and compatibility checks)."""
        return content_hash(json.dumps(self.model_dump(mode="json"), sort_keys=True))
