"""The L-Eval reader (``format: leval``) and the ``nq-long`` set: Natural Questions over whole Wikipedia pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from declrag.errors import DeclragError
from declrag.golden import load_golden

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "datasets" / "nq-long" / "natural_question.jsonl"


@pytest.fixture(autouse=True)
def _isolated_registry(monkeypatch, tmp_path_factory):
    # a ./datasets in some other working directory must not leak into these tests; the project's own is found
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    monkeypatch.setenv("DECLRAG_DATASETS", str(Path(__file__).resolve().parents[3] / "datasets"))


PAGE_A = ('Cellular respiration - wikipedia <H1> Cellular respiration </H1> <P> Cellular respiration makes ATP . It '
          'happens in the mitochondria . </P> <Table> <Tr> <Th_colspan="2"> Facts </Th> </Tr> <Tr> <Th> Yield </Th> '
          '<Td> about 38 ATP </Td> </Tr> </Table> <H2> Steps </H2> <Ul> <Li> Glycolysis </Li> <Li> the `` Krebs '
          "cycle '' </Li> </Ul> <P> Glycolysis comes first ; glycolysis happens in the cytoplasm . </P>")
PAGE_B = 'Derek Shepherd - Wikipedia <H1> Derek Shepherd </H1> <P> Derek Shepherd is played by Patrick Dempsey . </P>'


def _line(page: str, qa: list[tuple[str, str]]) -> str:
    return json.dumps({"instructions": [q for q, _ in qa], "outputs": [a for _, a in qa], "input": page,
                       "source": "natural_question", "evaluation": "f1"})


def _tiny(tmp_path: Path, *lines: str) -> Path:
    f = tmp_path / "tiny_nq.jsonl"
    f.write_text("\n".join(lines) + "\n")
    (tmp_path / "tiny.yaml").write_text("name: tiny\nformat: leval\npath: tiny_nq.jsonl\n")
    return f


def test_pages_become_clean_documents_and_answers_their_spans(tmp_path):
    _tiny(tmp_path,
          _line(PAGE_A, [("what is the first step of cellular respiration", "Glycolysis"),
                         ("how much atp does cellular respiration make", "about 38 ATP"),
                         ("what is the second step", "`` Krebs cycle ''"),
                         ("is respiration aerobic", "oxygen is needed")]),
          _line(PAGE_B, [("who plays derek shepherd", "Patrick Dempsey")]),
          _line(PAGE_A, [("what is the first step of cellular respiration", "Glycolysis"),  # the same page again
                         ("where does glycolysis happen", "the cytoplasm")]))
    g = load_golden(str(tmp_path / "tiny.yaml"))
    assert [(d.id, d.title) for d in g.documents] == [("tiny_nq-00", "Cellular respiration"),
                                                    ("tiny_nq-01", "Derek Shepherd")]
    a = g.doc("tiny_nq-00").text
    assert a == ("Cellular respiration\n\n"
                 "Cellular respiration makes ATP . It happens in the mitochondria .\n\n"
                 "Facts\nYield | about 38 ATP\n\n"
                 "Steps\n\n"
                 "Glycolysis\nthe `` Krebs cycle ''\n\n"
                 "Glycolysis comes first ; glycolysis happens in the cytoplasm .")
    assert g.doc("tiny_nq-01").text == "Derek Shepherd\n\nDerek Shepherd is played by Patrick Dempsey ."
    assert list(g.splits) == ["test"]
    ex = {e.id: e for e in g.split("test")}
    # the repeated page is one document: its new question goes to the first copy, the repeated one is dropped
    assert list(ex) == ["tiny_nq-00-0", "tiny_nq-00-1", "tiny_nq-00-2", "tiny_nq-00-3", "tiny_nq-01-0", "tiny_nq-02-1"]
    assert all(e.gold == {"tiny_nq-00": 1} for i, e in ex.items() if i.startswith(("tiny_nq-00", "tiny_nq-02")))
    first = ex["tiny_nq-00-0"]
    assert first.question == "what is the first step of cellular respiration" and first.answers == ("Glycolysis",)
    # every occurrence (any case, whole words) is a span of one credit, pointing at the answer in the cleaned text
    assert [a[s.start:s.end] for s in first.spans] == ["Glycolysis", "Glycolysis", "glycolysis"]
    assert {(s.doc, s.credit, s.grade) for s in first.spans} == {("tiny_nq-00", "answer", 1)}
    for e in ex.values():
        for s in e.spans:
            assert g.doc(s.doc).text[s.start:s.end].lower() == s.answer.lower()
    assert [a[s.start:s.end] for s in ex["tiny_nq-00-2"].spans] == ["`` Krebs cycle ''"]
    assert [a[s.start:s.end] for s in ex["tiny_nq-02-1"].spans] == ["the cytoplasm"]
    # an answer that occurs nowhere in its page: scored on the document
    assert ex["tiny_nq-00-3"].spans == () and ex["tiny_nq-00-3"].gold == {"tiny_nq-00": 1}
    assert ex["tiny_nq-01-0"].gold_spans()[0].doc == "tiny_nq-01"


def test_a_path_is_detected_and_plain_text_kept(tmp_path):
    f = _tiny(tmp_path, _line("A plain report .\n\nIts second paragraph names Acme .", [("who", "Acme")]))
    g = load_golden(str(f))
    assert g.documents[0].text == "A plain report .\n\nIts second paragraph names Acme ." and g.documents[0].title == ""
    assert len(g.split("test")[0].spans) == 1


@pytest.mark.parametrize(("line", "problem"), [
    ('{"input": "x", "instructions": ["q"], "outputs": ["a"]', "not valid JSON"),
    ('{"input": "x", "instructions": ["q"]}', "missing field(s) outputs"),
    ('{"input": "x", "instructions": ["q", "r"], "outputs": ["a"]}', "2 instructions but 1 outputs"),
    ('{"input": "x", "instructions": "q", "outputs": ["a"]}', "`instructions` must be a list of strings"),
    ('{"input": "", "instructions": ["q"], "outputs": ["a"]}', "`input` must be a non-empty string"),
])
def test_a_corrupt_line_is_one_clear_error(tmp_path, line, problem):
    _tiny(tmp_path, _line(PAGE_B, [("who plays derek shepherd", "Patrick Dempsey")]), line)
    with pytest.raises(DeclragError) as err:
        load_golden(str(tmp_path / "tiny.yaml"))
    assert f"tiny_nq.jsonl:2: {problem}" in str(err.value) and err.value.hint


def test_nq_long_real():
    if not DATA.is_file():
        pytest.skip(f"shared dataset not found: {DATA}")
    g = load_golden("nq-long")
    examples = g.split("test")
    # 21 lines, of which lines 2 and 21 are the same Harry Potter page with the same five queries: read once
    assert len(g.documents) == 20 and len(examples) == 104 == 109 - 5
    assert len({e.id for e in examples}) == len(examples) and len({d.id for d in g.documents}) == 20
    assert g.doc("natural_question-00").title == "The Handmaid 's Tale ( TV series )"
    assert not any(re.search(r"(?<!\S)</?(P|Td|Th|Tr|Li|Ul|Ol|Dl|Dd|Dt|Table|H\d)\b[^\s>]*>", d.text)
                   for d in g.documents)
    with_spans = [e for e in examples if e.spans]
    assert len(with_spans) >= 100
    for e in with_spans:
        (doc,) = e.gold
        text = g.doc(doc).text
        assert {s.credit for s in e.spans} == {"answer"} and all(s.doc == doc for s in e.spans)
        assert all(" ".join(text[s.start:s.end].lower().split()) == " ".join(e.answers[0].lower().split())
                   for s in e.spans)
    assert max(len(e.spans) for e in examples) > 50  # "New England Patriots": every occurrence, not the first 50
