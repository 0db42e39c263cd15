"""The one lookup for prompt variants, search spaces and dataset declarations (declrag.runtime.resources): an explicit
path, then $DECLRAG_<KIND> folders, then ./<kind>, then the packaged defaults; and `declrag init`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from declrag.runtime import resources
from declrag.cli import main
from declrag.errors import DeclragError
from declrag.golden import find_spec, known_datasets, load_golden
from declrag.optimize._space import read_space
from declrag.lm.prompts._signatures import spec

ROOT = Path(__file__).resolve().parents[2]
# one shipped file per kind, and what a copy of it may change without breaking it
SAMPLE = {"signatures": "generate", "optimizers": "retrieval", "datasets": "scifact"}


def variant(kind: str, folder: Path, tag: str) -> Path:
    """A copy of the shipped SAMPLE[kind] file in ``folder`` whose description-like field says ``tag``."""
    data = yaml.safe_load((resources.default_dir(kind) / f"{SAMPLE[kind]}.yaml").read_text())
    if kind == "signatures":
        data["variants"]["plain"] = f"{tag}: {{abstain}}"
    else:
        data["description"] = tag
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / f"{SAMPLE[kind]}.yaml"
    f.write_text(yaml.safe_dump(data))
    return f


def tag_of(kind: str, name: str) -> str:
    """What the public API of each kind reads for SAMPLE[kind] under ``name`` (a name or a path)."""
    if kind == "signatures":
        return spec(name).variants["plain"].split(":")[0]
    if kind == "optimizers":
        return read_space(name).description
    if "/" in name:  # a declaration given by path: what load_golden reads
        return yaml.safe_load(resources.find("datasets", name).read_text())["description"]
    return find_spec(name).description


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder as the current folder, with no $DECLRAG_* folders."""
    for var in resources.ENV.values():
        monkeypatch.delenv(var, raising=False)
    cwd = tmp_path / "project"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_defaults_exist_for_every_kind(project):
    for kind in resources.KINDS:
        d = resources.default_dir(kind)
        assert d is not None and (d / f"{SAMPLE[kind]}.yaml").is_file()
        # this test suite runs on the editable install: the checkout's folders, or a wheel's packaged copy
        assert d == ROOT / kind or d.parts[-3:] == ("declrag", "defaults", kind)
        assert resources.search_dirs(kind)[-1] == d
        assert resources.find(kind, SAMPLE[kind]) == d / f"{SAMPLE[kind]}.yaml"
    from declrag_bench.servers import SCRIPTS  # the benchmarks run the checkout's server scripts

    assert (SCRIPTS / "weaviate.sh").is_file() and (SCRIPTS / "postgres.sh").is_file()


@pytest.mark.parametrize("kind", resources.KINDS)
def test_lookup_order(kind, project, tmp_path, monkeypatch):
    name = SAMPLE[kind]
    default = tag_of(kind, name)
    assert default != "cwd"
    variant(kind, project / kind, "cwd")  # ./<kind> wins over the packaged defaults
    assert tag_of(kind, name) == "cwd"
    env1, env2 = tmp_path / "env1", tmp_path / "env2"
    variant(kind, env2, "env2")
    monkeypatch.setenv(resources.ENV[kind], f"{env1}{resources.os.pathsep}{env2}")  # env1 exists nowhere
    assert tag_of(kind, name) == "env2"  # $DECLRAG_<KIND> wins over ./<kind>
    variant(kind, env1, "env1")
    assert tag_of(kind, name) == "env1"  # earlier env folders win
    explicit = variant(kind, tmp_path / "mine", "explicit")
    if kind != "signatures":  # signatures are named by stage, never by path
        assert tag_of(kind, str(explicit)) == "explicit"  # an explicit path wins over everything
    assert resources.search_dirs(kind)[:3] == [env1, env2, project / kind]


@pytest.mark.parametrize("kind", resources.KINDS)
def test_a_missing_name_lists_what_is_there_and_where(kind, project):
    with pytest.raises(DeclragError) as e:
        resources.find(kind, "no-such-thing")
    msg = str(e.value)
    assert SAMPLE[kind] in msg and str(project / kind) in msg and str(resources.default_dir(kind)) in msg
    assert resources.ENV[kind] in e.value.hint and "declrag init" in e.value.hint


def test_public_errors_say_where_they_looked(project):
    with pytest.raises(DeclragError, match=r"no signature file nothing\.yaml in .*available: .*generate"):
        spec("nothing")
    with pytest.raises(DeclragError, match=r"known: .*scifact.*looked in"):
        find_spec("nothing")
    with pytest.raises(DeclragError, match=r"available: .*retrieval"):
        read_space("nothing")


def test_space_names_and_missing_paths_resolve_to_the_defaults(project):
    d = resources.default_dir("optimizers")
    assert read_space("retrieval").name == "retrieval" and read_space("default").name == "default"
    # a path that does not exist but names a known space: optimizers/retrieval.yaml works from any folder
    assert resources.find("optimizers", "optimizers/retrieval.yaml") == d / "retrieval.yaml"
    assert read_space("optimizers/retrieval.yaml").name == "retrieval"
    assert read_space(Path("elsewhere/bench.yml")).name == read_space(d / "bench.yaml").name
    with pytest.raises(DeclragError, match=r"no file optimizers/nope\.yaml"):
        read_space("optimizers/nope.yaml")
    # the same rule for dataset declarations
    assert resources.find("datasets", "datasets/scifact.yaml") == resources.default_dir("datasets") / "scifact.yaml"


def test_dataset_declarations_resolve_their_paths_relative_to_their_file(project):
    (project / "data").mkdir()
    (project / "data" / "gold.jsonl").write_text('{"question": "q?", "answers": ["a"]}\n')
    (project / "datasets").mkdir()
    (project / "datasets" / "mine.yaml").write_text("name: my-set\nformat: jsonl\npath: ../data/gold.jsonl\n")
    assert known_datasets()["my-set"] == project / "datasets" / "mine.yaml"
    assert [e.question for e in load_golden("my-set").split("all")] == ["q?"]
    assert "scifact" in known_datasets()  # the packaged declarations stay visible


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_init_copies_the_defaults_and_never_overwrites_without_force(project, capsys, tmp_path):
    target = tmp_path / "new-project"
    code, out, err = run(capsys, "init", str(target))
    assert code == 0, err
    for kind in resources.KINDS:
        shipped = sorted(f.name for f in resources.default_dir(kind).iterdir()
                         if f.suffix == ".yaml" or f.name == "README.md")
        assert sorted(f.name for f in (target / kind).iterdir()) == shipped
        assert (target / kind / f"{SAMPLE[kind]}.yaml").read_bytes() == \
            (resources.default_dir(kind) / f"{SAMPLE[kind]}.yaml").read_bytes()
    n = sum(1 for kind in resources.KINDS for _ in (target / kind).iterdir())
    assert f"{n} files written, 0 skipped" in out and "win over the packaged defaults" in out
    assert f"wrote {target / 'signatures' / 'generate.yaml'}" in out

    edited = target / "signatures" / "generate.yaml"
    edited.write_text("mine")
    (target / "optimizers" / "default.yaml").unlink()
    code, out, _ = run(capsys, "init", str(target))
    assert code == 0
    assert edited.read_text() == "mine"  # never overwritten
    assert f"skipped {edited} (exists; --force overwrites)" in out
    assert f"1 files written, {n - 1} skipped" in out and (target / "optimizers" / "default.yaml").is_file()

    code, out, _ = run(capsys, "init", str(target), "--force")
    assert code == 0 and f"{n} files written, 0 skipped" in out
    assert edited.read_bytes() == (resources.default_dir("signatures") / "generate.yaml").read_bytes()


def test_init_defaults_to_the_current_folder_and_the_copies_win(project, capsys):
    code, out, err = run(capsys, "init")
    assert code == 0, err
    assert (project / "optimizers" / "retrieval.yaml").is_file()
    for kind in resources.KINDS:
        assert resources.find(kind, SAMPLE[kind]) == project / kind / f"{SAMPLE[kind]}.yaml"


def test_init_refuses_to_copy_the_checkout_onto_itself(monkeypatch, capsys):
    if resources.default_dir("signatures") != ROOT / "signatures":
        pytest.skip("not an editable install of a checkout")
    monkeypatch.chdir(ROOT)
    code, _, err = run(capsys, "init")
    assert code == 2 and "already live" in err
