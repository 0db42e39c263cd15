"""The tests of the benchmarks share the product's test set-up (tests/conftest.py): the session's isolated caches
and the fixtures that start real servers or load the real embedding model."""

from tests.conftest import _isolated_cache, minilm, weaviate_url  # noqa: F401  (fixtures: registered by being here)
