"""Telling callers from their ``Authorization`` header (`Callers`), and scoping their searches (`Access`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from ._keys import KeysFile
from ._principals import Principal, Unlabelled, scope_filter
from ._tokens import Refused, TokenVerifier


@dataclass
class Callers:
    """A server's callers: keys from a keys file, bearer JWTs, or both."""

    keys: KeysFile | None = None
    tokens: TokenVerifier | None = None

    def principal(self, authorization: bytes | str) -> Principal:
        """The caller an ``Authorization`` header names (``Bearer <key or JWT>``). Raises `Refused` (401) for no
        header, another scheme, an unknown key or a bad token; (403) for a token without groups."""
        header = authorization.decode("latin-1") if isinstance(authorization, bytes) else authorization
        scheme, _, credential = header.strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise Refused(401, "unauthorized: send 'Authorization: Bearer <your key or token>'")
        if self.tokens is not None and credential.count(".") == 2:  # a JWT: header.payload.signature
            return self.tokens.principal(credential)
        found = self.keys.principal(credential) if self.keys is not None else None
        if found is None:
            raise Refused(401, "unauthorized: unknown key")
        return found

    async def aprincipal(self, authorization: bytes | str) -> Principal:
        """`principal`, on an event loop: where tokens are verified against a JWKS URL, on a worker thread (fetching
        the provider's keys blocks), so the loop never waits on the network."""
        if self.tokens is not None and self.tokens.remote:
            return await asyncio.to_thread(self.principal, authorization)
        return self.principal(authorization)


@dataclass
class Access:
    """Who may call a server and what each may read: ``callers``, and who reads unlabelled documents."""

    callers: Callers
    unlabelled: Unlabelled = "everyone"

    def scope(self, where: Mapping[str, Any] | None, principal: Principal) -> dict[str, Any]:
        """``where`` narrowed to the documents ``principal`` may read (`scope_filter`)."""
        return scope_filter(where, principal, self.unlabelled)

    @staticmethod
    def still_readable(store: Any, where: Mapping[str, Any] | None, docs: list[str]) -> bool:
        """Whether every document of ``docs`` (a cached answer's) may still be read under the scoped filter ``where``
        in ``store`` (a `declrag.stores.base.Store`): readers relabelled while serving (`Store.relabel`) never let
        a cached answer outlive its caller's right to it."""
        if not docs:
            return True
        mine = {"doc_id": {"$in": docs}}
        return store.count({"$and": [dict(where), mine]} if where else mine) == store.count(mine)

    def describe(self) -> str:
        """One line for the server's start: where callers come from, and the policy for unlabelled documents."""
        keys, tokens = self.callers.keys, self.callers.tokens
        parts = ([f"{len(keys.entries)} keys from {keys.path}"] if keys else []) + (["bearer JWTs"] if tokens else [])
        return (f"callers: {' and '.join(parts)}; each sees only the documents their groups may read (unlabelled "
                f"ones: {self.unlabelled})")


class AccessSettings(BaseModel):
    """Where a server's callers come from (`declrag serve --keys / --jwks / --jwt-secret-file`) and who reads unlabelled
    documents; `build` loads and checks them (at start-up, in every server process)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # errors never show the secret
    keys_file: Path | None = None
    jwt_secret: SecretStr | None = None
    jwks: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    groups_claim: str = Field("groups", min_length=1)
    unlabelled: Unlabelled = "everyone"

    @model_validator(mode="after")
    def _some_callers(self) -> AccessSettings:
        if self.keys_file is None and self.jwt_secret is None and self.jwks is None:
            raise ValueError("callers need a keys file, a JWT secret or a JWKS")
        return self

    def build(self) -> Access:
        """The server's `Access`. Raises `DeclragError` for a keys file or JWKS that cannot be read or is malformed."""
        tokens = None
        if self.jwt_secret is not None or self.jwks is not None:
            tokens = TokenVerifier(self.jwt_secret.get_secret_value() if self.jwt_secret else None, self.jwks,
                                   self.jwt_issuer, self.jwt_audience, self.groups_claim)
        keys = KeysFile.load(self.keys_file) if self.keys_file is not None else None
        return Access(Callers(keys, tokens), self.unlabelled)
