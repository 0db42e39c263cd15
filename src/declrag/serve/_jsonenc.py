"""JSON for the server's responses, encoded by orjson (several times faster than the standard library's
encoder on an answer's payload), with the standard library's rules wherever orjson refuses a value (non-string
keys, integers beyond 64 bits, lone surrogates, a type orjson does not know): those values serialize, or fail,
as before. The text differs only where JSON allows it to (``0.00001`` for ``1e-05``; the same numbers), and a
NaN or infinity becomes ``null`` where the standard encoder refused it (a 500); the program's payloads hold
neither. Server-sent events keep the standard encoder: their exact text is what streaming clients have seen."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse


class FastJSONResponse(JSONResponse):
    """Starlette's `JSONResponse` (compact, UTF-8), rendered by orjson; the standard encoder where orjson
    refuses the content, so such content renders, or fails, as with `JSONResponse`."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except orjson.JSONEncodeError:
            return super().render(content)
