"""Declarative prompts: every shipped signature loads and builds; malformed files are named precisely."""

import pytest

from declrag.errors import DeclragError
from declrag.lm.prompts._signatures import load_specs, read_spec

GOOD = """
stage: generate
inputs: {question: {type: str}, context: {type: str}}
outputs: {answer: {type: str, desc: the answer}}
default: plain
variants: {plain: "Answer. If unsure say {abstain}", terse: "Short."}
demos: [{question: q, context: c, answer: a}]
"""


def test_shipped_signatures_build_every_variant():
    specs = load_specs()
    assert {"generate", "rewrite", "multi_query", "hyde", "decompose", "step_back", "rerank", "judge"} <= set(specs)
    assert {"plain", "terse", "detailed", "role", "strict"} <= set(specs["generate"].variants)
    for spec in specs.values():
        for variant in spec.variants:
            sig = spec.build(variant, abstain="I don't know.")
            assert list(sig.input_fields) == list(spec.inputs) and list(sig.output_fields) == list(spec.outputs)
            assert "{abstain}" not in sig.instructions
    assert specs["multi_query"].build().output_fields["queries"].annotation == list[str]


def test_abstain_phrase_is_substituted(tmp_path):
    f = tmp_path / "generate.yaml"
    f.write_text(GOOD)
    assert read_spec(f).build("plain", abstain="No idea.").instructions == "Answer. If unsure say No idea."
    with pytest.raises(DeclragError, match="unknown prompt variant 'chatty'"):
        read_spec(f).build("chatty")


@pytest.mark.parametrize("change, message", [
    (("type: str, desc: the answer", "type: string, desc: the answer"), "outputs.answer.type"),
    (("default: plain", "default: fancy"), "default variant 'fancy'"),
    (("demos: [{question: q, context: c, answer: a}]", "demos: [{question: q}]"), "demos.0 lacks"),
    (("stage: generate", "stage: generate\ncolour: red"), "colour"),
    (("outputs: {answer: {type: str, desc: the answer}}", "outputs: {}"), "at least one field"),
    (("inputs: {", "inputs: [{"), "inputs"),
])
def test_malformed_files_name_the_file_and_field(tmp_path, change, message):
    f = tmp_path / "generate.yaml"
    f.write_text(GOOD.replace(*change))
    with pytest.raises(DeclragError) as e:
        read_spec(f)
    assert str(f) in str(e.value) and message in str(e.value)


def test_unparseable_yaml(tmp_path):
    f = tmp_path / "judge.yaml"
    f.write_text("stage: [unclosed")
    with pytest.raises(DeclragError, match="judge.yaml"):
        read_spec(f)
