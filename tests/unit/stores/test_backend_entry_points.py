"""A store backend that lives outside declrag: an installed distribution registers it under the ``declrag.stores``
entry points (`declrag.stores.base.ENTRY_POINTS`), and a store URI of its scheme opens it, as the built-in ones do."""

from __future__ import annotations

import pytest

from declrag.errors import DeclragError
from declrag.stores import open_store
from declrag.stores.backends import backends
from declrag.stores.base import StoreMeta
from declrag.testing import HashEmbedder
from declrag.testing.store_contract import corpus

BACKEND = '''
from pathlib import Path

from declrag.stores._lancedb import LanceStore


class ShelfStore(LanceStore):
    """The embedded store, under a scheme of its own: shelf:///folder."""

    @classmethod
    def from_uri(cls, uri):
        return cls(Path(uri.split("://", 1)[1]))
'''


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A distribution on sys.path, as pip would leave it: its module and its dist-info with the entry point."""
    site = tmp_path / "site"
    (site / "shelf-0.1.dist-info").mkdir(parents=True)
    (site / "shelf-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: shelf\nVersion: 0.1\n")
    (site / "shelf-0.1.dist-info" / "entry_points.txt").write_text("[declrag.stores]\nshelf = shelf_store:ShelfStore\n"
                                                                    "broken = shelf_store:NoSuchStore\n")
    (site / "shelf_store.py").write_text(BACKEND)
    monkeypatch.syspath_prepend(str(site))
    backends.cache_clear()
    yield
    backends.cache_clear()


def test_a_backend_registered_by_another_distribution_opens_from_its_uri(installed, tmp_path):
    assert backends()["shelf"] == ("shelf", "shelf_store:ShelfStore")
    store, meta = open_store(f"shelf://{tmp_path / 'kept'}")
    assert type(store).__name__ == "ShelfStore" and meta.backend == "lancedb"
    store.upsert(*corpus(HashEmbedder()))
    assert store.count() == 10 and (tmp_path / "kept").is_dir()
    assert StoreMeta(backend="shelf").backend == "shelf"  # its name is a backend a store's metadata may record


def test_a_registered_backend_that_cannot_be_loaded_is_one_clear_error(installed, tmp_path):
    with pytest.raises(DeclragError) as e:
        open_store(f"broken://{tmp_path}")
    assert "store backend for broken:// (shelf_store:NoSuchStore) cannot be loaded" in e.value.message
    with pytest.raises(DeclragError) as e:
        open_store(f"nothere://{tmp_path}")
    assert "no backend for nothere://" in e.value.message and "shelf://" in e.value.hint
