"""`declrag serve`: a program answering over HTTP. `server` resolves what to serve and runs it (`serve`); `app`
builds the FastAPI app (`create_app`) over `service`, which answers each request; `settings` holds what can be
set (`ServeSettings`)."""

from ..answering.selection import DEFAULT_NAME
from ._app import create_app
from ._server import record_beside, resolve, serve
from ._settings import ServeSettings

__all__ = ["DEFAULT_NAME", "ServeSettings", "create_app", "record_beside", "resolve", "serve"]
