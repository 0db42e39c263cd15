"""The ``inpars`` generator of `declrag synth`: few-shot query generation (InPars, Bonifacio et al., SIGIR 2022).

Three documents, each followed by a query a user would type to find it, then the passage and "Relevant Query:";
the model completes one line. It suits a base model (``local/gemma3-270m`` has no chat template: the local
provider sends it the prompt as text to continue) and works on any LiteLLM route. Gold: the passage.
"""

from __future__ import annotations

import re

from ..config import LMConfig
from ..lm import make_lm, override_lm, stage
from ._generate import content_words, off_passage, ready

PASSAGE_WORDS = 160  # a passage is cut to its first words: a small model's prompt stays short
QUERY_WORDS = (2, 30)
DEMOS = (
    ("The Eiffel Tower was built as the entrance arch of the 1889 World's Fair in Paris. It was designed by the "
     "engineering company of Gustave Eiffel, and at 330 metres it was the tallest structure in the world until 1930.",
     "when was the eiffel tower the tallest structure"),
    ("Insulin is a peptide hormone produced by the beta cells of the pancreatic islets. It regulates the metabolism "
     "of carbohydrates, fats and protein by promoting the absorption of glucose from the blood.",
     "insulin effect on glucose absorption"),
    ("Retrieval-augmented generation combines a retriever with a language model: passages found for a question are "
     "put in the prompt, so that the answer can cite them and need not rely on what the model memorized.",
     "why do language models cite retrieved passages"),
)
INSTRUCTION = "Each document is followed by a search query that a user would type to find it."  # a chat model's cue
_LEAD = re.compile(r"^\s*(?:relevant query|query|question)\s*[:.-]\s*", re.I)


def prompt(passage: str) -> str:
    words = passage.split()
    text = " ".join(words[:PASSAGE_WORDS])
    shots = "".join(f"Example {i}:\nDocument: {d}\nRelevant Query: {q}\n\n" for i, (d, q) in enumerate(DEMOS, 1))
    return f"{INSTRUCTION}\n\n{shots}Example {len(DEMOS) + 1}:\nDocument: {text}\nRelevant Query:"


def clean_query(text: str | None) -> str | None:
    """The query in a reply: its first non-empty line, labels and quotes removed; None when it is not usable."""
    line = next((x.strip() for x in (text or "").splitlines() if x.strip()), "")
    q = _LEAD.sub("", line).strip().strip('"“”').strip()
    if not re.search(r"[^\W\d_]", q) or not QUERY_WORDS[0] <= len(q.split()) <= QUERY_WORDS[1]:
        return None
    return q


class InParsWriter:
    """Queries from an LM route, one call per passage (metered as stage ``synth``, cached as every declrag LM)."""

    calls_per_passage = 1.0
    demo_text = " ".join(q for _, q in DEMOS)

    def __init__(self, route: str, max_tokens: int = 32):
        self.route = ready(route)
        self.lm = make_lm(LMConfig(route=route, temperature=0.0, max_tokens=max_tokens, seed=0))

    def query(self, passage: str) -> tuple[str | None, str | None]:
        """(the query, None) or (None, why there is none)."""
        lm = override_lm() or self.lm
        with stage("synth"):
            reply = lm(prompt(passage), stop=["\n"])  # one user message: DSPy's plain-prompt call
        text = reply[0] if reply else ""
        q = clean_query(text.get("text") if isinstance(text, dict) else text)
        if q is None:
            return None, "malformed model output (no usable query)"
        if not content_words(q) or off_passage(q, passage, self.demo_text):
            return None, "query off its passage (no word of it, or more of the demos')"
        return q, None
