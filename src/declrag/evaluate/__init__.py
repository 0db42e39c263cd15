"""`declrag eval`: a program run over golden questions and scored (`evaluation`), and its report (`report`)."""

from .evaluation import EvalSpec, Evaluation, compare

__all__ = ["EvalSpec", "Evaluation", "compare"]
