"""`RAGProgram`: the whole pipeline as one `dspy.Module`, the ordered list of its stages, composed from a
`ProgramConfig`; and its artifact: one versioned folder that `declrag.load` (and later `declrag serve`) turns back
into the very same program.

    prog = RAGProgram(ProgramConfig(), store="my-store")
    answer = prog(question="...")          # an Answer (a dspy.Prediction)
    prog.save("runs/x/best"); same = declrag.load("runs/x/best")
"""

from ...config import LOCAL_DEFAULT_MODE, default_config, read_config, with_model
from ..saved import saved_config
from ._loading import default_program, load
from ._program import NEAREST_CITED, Answer, RAGProgram

__all__ = ["LOCAL_DEFAULT_MODE", "NEAREST_CITED", "Answer", "RAGProgram", "default_config", "default_program", "load",
           "read_config", "saved_config", "with_model"]
