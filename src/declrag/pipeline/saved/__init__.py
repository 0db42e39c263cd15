"""A program as it is saved: its artifact folder (`write_artifact`), read back (`read_saved`, `saved_config`), with
a fine-tuned embedder packed beside it (`with_packed_embedder`)."""

from ._artifact import ARTIFACT_FORMAT, read_saved, saved_config, with_packed_embedder, write_artifact

__all__ = ["ARTIFACT_FORMAT", "read_saved", "saved_config", "with_packed_embedder", "write_artifact"]
