"""Stores: where chunks live and how they are searched. `open_store` is the one way in (`opening`: a URI's scheme
picks the backend); `base` holds the protocol every backend implements (`Store`) and its types."""

from ._opening import (
    check_ingest,
    child_uri,
    connect,
    list_stores,
    local_folder,
    open_store,
    read_meta,
    store_uri,
)
from .base import DocRecord, Filter, Store, StoreCheck, StoreMeta

__all__ = ["DocRecord", "Filter", "Store", "StoreCheck", "StoreMeta", "check_ingest", "child_uri", "connect",
           "list_stores", "local_folder", "open_store", "read_meta", "store_uri"]
