"""Golden sets: questions with reference answers and gold documents, for evaluation and benchmarks. `loading` finds
a set (a path, a YAML declaration, a registered name) and picks its reader; `formats` holds one reader per layout;
`sets` the `Example` and `GoldenSet` types."""

from ._loading import DatasetSpec, HFSpec, dataset_dirs, find_spec, known_datasets, load_golden
from ._sets import LABELS, Example, GoldenSet, labels_of

__all__ = ["LABELS", "DatasetSpec", "Example", "GoldenSet", "HFSpec", "dataset_dirs", "find_spec", "known_datasets",
           "labels_of", "load_golden"]
