"""One error type for everything a user can fix: it names the input and says how to fix it."""

from __future__ import annotations


class DeclragError(Exception):
    """A problem with the user's input, configuration or environment.

    ``str(err)`` is the message; ``err.hint`` says what to do about it. The CLI prints both and exits
    with status 2 instead of showing a traceback.
    """

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  fix: {self.hint}"
