"""The tests of the benchmarks share the product's test set-up (tests/conftest.py): the session's isolated caches
and the fixtures that start real servers or load the real embedding model."""

import pytest
from tests.conftest import _isolated_cache, minilm, store, weaviate_url  # noqa: F401, F811  (fixtures: registered by being here)


@pytest.fixture
def texts_store(tmp_path, minilm):  # noqa: F811  (the fixture imported above)
    """A small real index (the store contract's texts, one file each, MiniLM) in ``tmp_path / "store"``: its path."""
    import declrag
    from declrag.testing.store_contract import TEXTS

    (tmp_path / "docs").mkdir()
    for name, sents in TEXTS.items():
        (tmp_path / "docs" / f"{name}.txt").write_text(" ".join(sents))
    declrag.index([tmp_path / "docs"], store=tmp_path / "store", embedder=minilm, progress=False)
    return tmp_path / "store"
