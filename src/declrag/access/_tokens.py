"""Bearer JWTs from an identity provider, verified with PyJWT: the signature (a shared secret, or the provider's
public keys from a JWKS file or URL), the expiry, and, where given, the issuer and audience; the caller's name from
``sub`` and their groups from a configurable claim (``groups``; a dotted path such as ``realm_access.roles`` reads
a nested one). Unsigned tokens (``alg: none``) and algorithms of another kind than the keys' are refused."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DeclragError
from ._principals import Principal

HMAC = ["HS256", "HS384", "HS512"]
PUBLIC = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
LEEWAY_S = 30  # clock skew allowed on exp / nbf / iat


class Refused(Exception):
    """A request's credentials refused: ``status`` 401 (not who they say: no, bad or expired credentials) or 403 (who
    they say, but nothing to read with: no groups), and a one-line reason the client is told."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass
class TokenVerifier:
    """Verifies bearer JWTs. Exactly one of ``secret`` (HMAC) and ``jwks`` (a JWKS file's path, or an https URL
    fetched by PyJWT's client, its keys cached five minutes) gives the keys."""

    secret: str | None = None
    jwks: str | None = None
    issuer: str | None = None
    audience: str | None = None
    groups_claim: str = "groups"
    name_claim: str = "sub"

    def __post_init__(self) -> None:
        import jwt  # PyJWT: loaded when tokens are configured

        if (self.secret is None) == (self.jwks is None):
            raise DeclragError("JWT callers need exactly one of a shared secret and a JWKS (file or URL)",
                               hint="declrag serve --jwt-secret-file FILE, or --jwks FILE|URL")
        if self.secret is not None and len(self.secret.encode()) < 32:
            raise DeclragError("the JWT secret is shorter than 32 bytes (RFC 7518 asks at least the hash's size)",
                               hint="use a random secret of 32 bytes or more")
        self._client = self._set = None
        if self.jwks is not None and self.jwks.startswith(("https://", "http://")):
            self._client = jwt.PyJWKClient(self.jwks, cache_keys=True, lifespan=300)
        elif self.jwks is not None:
            try:
                self._set = jwt.PyJWKSet.from_json(Path(self.jwks).read_text(encoding="utf-8"))
            except OSError as e:
                raise DeclragError(f"cannot read the JWKS file {self.jwks}: {e.strerror or e}",
                                   hint="give --jwks the provider's JWKS file or its https URL") from None
            except (jwt.PyJWKSetError, jwt.InvalidKeyError, ValueError) as e:
                raise DeclragError(f"{self.jwks} is not a usable JWKS: {e}",
                                   hint="download it from the provider's jwks_uri") from None

    @property
    def remote(self) -> bool:
        """Whether its keys come from a JWKS URL: verifying a token may then wait on the network (a first token,
        an unknown key id, the key cache's 300 s lifespan past)."""
        return self._client is not None

    def principal(self, token: str) -> Principal:
        """The caller a token names. Raises `Refused`: 401 for a token that is malformed, unsigned, signed by
        another key, expired, or for another issuer or audience; 403 for one without a list of groups."""
        import jwt  # as in __post_init__

        try:
            header = jwt.get_unverified_header(token)
            key: Any
            if self.secret is not None:
                key, algorithms = self.secret, HMAC
            elif self._set is not None:
                kid = header.get("kid")
                found = [k for k in self._set.keys if kid is None or k.key_id == kid]
                if not found:
                    raise Refused(401, "the token's key (kid) is not in the JWKS")
                key, algorithms = found[0], PUBLIC
            else:
                assert self._client is not None
                key, algorithms = self._client.get_signing_key_from_jwt(token), PUBLIC
            claims = jwt.decode(token, key, algorithms=algorithms, issuer=self.issuer, audience=self.audience,
                                leeway=LEEWAY_S, options={"require": ["exp"], "verify_aud": self.audience is not None})
        except Refused:
            raise
        except jwt.ExpiredSignatureError:
            raise Refused(401, "the token has expired") from None
        except jwt.PyJWKClientError as e:
            raise Refused(401, f"the token's key could not be found: {e}") from None
        except jwt.InvalidTokenError as e:
            raise Refused(401, f"invalid token: {e}") from None
        name = claims.get(self.name_claim)
        if not isinstance(name, str) or not name:
            raise Refused(401, f"the token has no {self.name_claim!r} claim naming the caller")
        groups: Any = claims
        for part in self.groups_claim.split("."):
            groups = groups.get(part) if isinstance(groups, dict) else None
        if groups is None:
            raise Refused(403, f"the token has no {self.groups_claim!r} claim: no groups, nothing to read")
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            raise Refused(403, f"the token's {self.groups_claim!r} claim is not a list of group names")
        if not groups:
            raise Refused(403, f"the token's {self.groups_claim!r} claim names no group: nothing to read")
        return Principal(name, frozenset(g for g in groups if g != "*"))
