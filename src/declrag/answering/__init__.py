"""The answering service below every front end: `AnswerService` takes a `Request` (a question or a search, its
filter, history and caller) and answers it with a loaded `Program`: one place for the checks, the caller's scope,
admission and timeouts, the semantic cache, exploration, metrics and the usage recorder. HTTP (`declrag.serve`),
MCP (`declrag.serve.mcp`) and the CLI (`declrag ask`) are thin adapters over it; none calls the program itself."""

from ._metrics import Metrics
from ._program import Program
from ._requests import CHAT_FIELDS, CLI_FIELDS, NO_USAGE, SEARCH_FIELDS, TOOL_FIELDS, ApiError, Fields, Request
from ._semantic_cache import SemanticCache
from ._service import AnswerService
from ._settings import ServiceSettings

__all__ = ["CHAT_FIELDS", "CLI_FIELDS", "NO_USAGE", "SEARCH_FIELDS", "TOOL_FIELDS", "AnswerService", "ApiError",
           "Fields", "Metrics", "Program", "Request", "SemanticCache", "ServiceSettings"]
