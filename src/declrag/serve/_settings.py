"""`declrag serve`'s settings: every limit, with its CLI flag (`declrag.cli._serving`); those of answering itself are
`declrag.answering.ServiceSettings`'s."""

from __future__ import annotations

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from ..access import AccessSettings
from ..answering import ServiceSettings
from ..inputs import api_key_problem
from ..runtime.cache_limits import CacheLimits


class ServeSettings(ServiceSettings):
    """Server settings: the answering service's (`ServiceSettings`) and the HTTP server's; every limit has a CLI
    flag on ``declrag serve``."""
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # errors never show the API key
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    api_key: SecretStr | None = None  # when set, every route but /, /healthz and /readyz needs "Bearer <key>"
    max_body_bytes: int = Field(64 * 1024, ge=1)
    cors_origins: list[str] = []
    processes: int = Field(1, ge=1, le=64)  # server processes (`declrag.serve._processes`); the service's limits: each
    # the process-wide caches' bounds (declrag.runtime.cache_limits), applied by `declrag.serve.serve` before the
    # program loads;
    # None: left as the process has them (create_app never changes them)
    cache_limits: CacheLimits | None = None
    # callers, each with their own key or token and groups, and what each may read (`declrag.access`); None: one
    # user (with ``api_key``, or anyone who reaches the port) who reads every document
    access: AccessSettings | None = None

    @model_validator(mode="after")
    def _one_way_in(self) -> ServeSettings:
        if self.api_key is not None and self.access is not None:
            raise ValueError("an API key and callers (a keys file or JWTs) do not go together: with callers, each "
                             "has their own key; leave out --api-key-file")
        return self

    @field_validator("api_key")
    @classmethod
    def _sendable_key(cls, key: SecretStr | None) -> SecretStr | None:
        """A key clients can send in a header (visible ASCII), refused at start-up otherwise: the server
        compares it with the header's bytes, so another key could never authenticate."""
        if key is not None and (problem := api_key_problem(key.get_secret_value())):
            raise ValueError(f"the API key {problem}")
        return key
