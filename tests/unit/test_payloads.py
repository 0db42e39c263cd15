"""One payload per idea: the dicts the hot paths send for a ranked passage and a cited one are exactly their models
(`declrag.payloads`), which /v1/search's OpenAPI schema, the MCP tools' output schemas and `Answer.citations` share."""

from __future__ import annotations

from declrag.payloads import Citation, SearchHit
from declrag.types import Chunk, Hit

HIT = Hit.of(Chunk(id="rome#0", doc_id="rome", text="Rome is the capital of Italy.", start=10, end=39, position=0,
                   source="/data/rome.txt", title="Rome", page=None), 0.123456789, keyword=2.0)


def test_a_search_hit_payload_is_exactly_the_model_and_keeps_its_score_whole():
    p = SearchHit.payload(HIT, 1)
    assert list(p) == list(SearchHit.model_fields)
    assert SearchHit.model_validate(p).model_dump(mode="json") == p
    assert p["score"] == 0.123456789 and p["span"] == [10, 39] and p["rank"] == 1


def test_a_citation_payload_is_exactly_the_model_with_its_quotes_in_document_offsets():
    p = Citation.payload(2, HIT, False, [(2, 0, 4), (1, 5, 9)])
    assert set(p) == set(Citation.model_fields) and Citation.model_validate(p).model_dump(mode="json") == p
    assert p["quotes"] == [[10, 14]] and p["score"] == 0.123457  # only passage 2's quote, moved into the document
    bare = Citation.payload(1, HIT, True, [])
    assert "quotes" not in bare and Citation.model_validate(bare).quotes == [] and bare["nearest"] is False
    assert Citation.payload(1, HIT, False, [], nearest=True)["nearest"] is True
