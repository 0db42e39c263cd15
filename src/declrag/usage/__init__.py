"""Learning from use: what `declrag serve` answered and how its users rated it (`store`), recorded off the request
path (`recorder`), and turned into a golden set (`export`). docs/guides/usage.md."""

from ._store import UsageStore
from .export import export, golden_rows
from .recorder import Recorder, RecordSettings, row_of, span_hash

__all__ = ["RecordSettings", "Recorder", "UsageStore", "export", "golden_rows", "row_of", "span_hash"]
