"""Callers' credentials: the keys file (hashed at rest, checked on load), bearer JWTs (secret or JWKS), and every bad
credential a one-line 401/403, never a 500 and never a wider scope."""

from __future__ import annotations

import json
import stat
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient

from declrag.access import AccessSettings, Callers, KeysFile, Principal, Refused, TokenVerifier
from declrag.access._keys import key_hash
from declrag.access._principals import scope_filter
from declrag.config import ProgramConfig
from declrag.errors import DeclragError
from declrag.pipeline.program import RAGProgram
from declrag.serve import ServeSettings, create_app
from declrag.stores.base import Filter
from declrag.testing import HashEmbedder

SECRET = "a-shared-secret-of-more-than-32-bytes!"


def test_keys_are_kept_hashed_and_found_by_the_key(tmp_path):
    f = KeysFile(tmp_path / "keys.yaml")
    key = f.add("alice", "hr,staff")
    text = (tmp_path / "keys.yaml").read_text()
    assert key not in text and key_hash(key) in text
    assert stat.S_IMODE((tmp_path / "keys.yaml").stat().st_mode) == 0o600
    again = KeysFile.load(tmp_path / "keys.yaml")
    assert again.principal(key) == Principal("alice", frozenset({"hr", "staff"}))
    assert again.principal(key + "x") is None and again.named("alice").groups == {"hr", "staff"}
    again.remove("alice")
    assert KeysFile.load(tmp_path / "keys.yaml").entries == []


@pytest.mark.parametrize("body, message", [
    ("keys:\n- {name: a, groups: [hr], sha256: %s}\n- {name: a, groups: [x], sha256: %s}\n" % ("a" * 64, "b" * 64),
     "entries 1 and 2 have the same name 'a'"),
    ("keys:\n- {name: a, groups: [hr], sha256: %s}\n- {name: b, groups: [x], sha256: %s}\n" % ("a" * 64, "a" * 64),
     "the same key"),
    ("keys:\n- {name: a, groups: [hr], key: hunter2}\n", "holds a key in clear"),
    ("keys:\n- {name: a, groups: [hr], sha256: abc}\n", "sha256 is not 64"),
    ("keys:\n- {name: a, groups: [], sha256: %s}\n" % ("a" * 64), "has no groups"),
    ("keys:\n- {name: a, groups: ['*'], sha256: %s}\n" % ("a" * 64), "not a group a caller belongs to"),
    ("- a\n", "holds no 'keys:' list"),
    ("keys: [a\n", "not valid YAML"),
])
def test_a_bad_keys_file_is_one_line_naming_the_entry(tmp_path, body, message):
    (tmp_path / "keys.yaml").write_text(body)
    with pytest.raises(DeclragError, match=message):
        KeysFile.load(tmp_path / "keys.yaml")


def test_a_short_or_unsendable_key_is_refused(tmp_path):
    f = KeysFile(tmp_path / "keys.yaml")
    with pytest.raises(DeclragError, match="too short"):
        f.add("a", "hr", key="short")
    with pytest.raises(DeclragError, match="visible ASCII"):
        f.add("a", "hr", key="é" * 40)
    f.add("a", "hr")
    with pytest.raises(DeclragError, match="already has a caller named 'a'"):
        f.add("a", "eng")


YEAR = 365 * 86400


def token(claims: dict, key=SECRET, alg="HS256", headers=None) -> str:
    """A token valid for a year: the parameters below are made when the tests are collected, maybe long before they
    run."""
    return jwt.encode({"sub": "erin", "exp": int(time.time()) + YEAR, **claims}, key, algorithm=alg, headers=headers)


def test_jwts_signed_by_the_secret_name_their_caller_and_groups():
    v = TokenVerifier(secret=SECRET, groups_claim="realm_access.roles")
    got = v.principal(token({"realm_access": {"roles": ["hr", "eng"]}}))
    assert got == Principal("erin", frozenset({"hr", "eng"}))


@pytest.fixture
def jwks(tmp_path):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    return private, str(tmp_path / "jwks.json")


def test_jwts_are_checked_against_a_jwks_file(jwks):
    private, path = jwks
    v = TokenVerifier(jwks=path, issuer="https://idp.example", audience="declrag")
    good = {"groups": ["fin"], "iss": "https://idp.example", "aud": "declrag"}
    assert v.principal(token(good, private, "RS256", {"kid": "k1"})).groups == {"fin"}
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for bad, reason in [
        (token(good, other, "RS256", {"kid": "k1"}), "Signature verification failed"),
        (token({**good, "aud": "other"}, private, "RS256", {"kid": "k1"}), "invalid token"),
        (token({**good, "iss": "https://evil"}, private, "RS256", {"kid": "k1"}), "invalid token"),
        (token(good, private, "RS256", {"kid": "k9"}), "not in the JWKS"),
        (token(good, SECRET, "HS256", {"kid": "k1"}), "invalid token"),  # an HMAC token signed with a guessable key
    ]:
        with pytest.raises(Refused, match=reason) as e:
            v.principal(bad)
        assert e.value.status == 401


def unsigned(claims: dict) -> str:
    """An ``alg: none`` token, as an attacker writes it."""
    import base64

    b = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{b({'alg': 'none', 'typ': 'JWT'})}.{b({'sub': 'mallory', 'exp': int(time.time()) + YEAR, **claims})}."


@pytest.mark.parametrize("credential, status, reason", [
    (unsigned({"groups": ["hr", "eng", "fin", "exec"]}), 401, "invalid token"),
    (token({"groups": ["hr"], "exp": int(time.time()) - 3600}), 401, "expired"),
    ("not.a.jwt", 401, "invalid token"),
    (token({}), 403, "no 'groups' claim"),
    (token({"groups": "hr"}), 403, "not a list of group names"),
    (token({"groups": []}), 403, "names no group"),
    (token({"groups": ["hr"], "sub": ""}), 401, "no 'sub' claim"),
    (jwt.encode({"sub": "x", "groups": ["hr"]}, SECRET, algorithm="HS256"), 401, "exp"),  # no expiry at all
    ("dr_unknown-key-of-any-length-at-all-0000", 401, "unknown key"),
])
def test_bad_credentials_are_a_401_or_403_on_the_wire(tmp_path, store, credential, status, reason):
    keys = KeysFile(tmp_path / "keys.yaml")
    keys.add("alice", "hr")
    app = create_app(RAGProgram(ProgramConfig.model_validate({"generate": {"mode": "extractive"}}), store=store,
                                embedder=HashEmbedder()), "x", None,
                     ServeSettings(access=AccessSettings(keys_file=tmp_path / "keys.yaml", jwt_secret=SECRET)))
    with TestClient(app) as c:
        for path, body in (("/v1/ask", {"question": "capital?"}), ("/v1/search", {"query": "capital"})):
            r = c.post(path, json=body, headers={"Authorization": f"Bearer {credential}"})
            assert r.status_code == status and reason in r.json()["error"], (path, r.status_code, r.text)
        assert c.post("/v1/ask", json={"question": "x"}, headers={"Authorization": "Basic abc"}).status_code == 401


def test_callers_need_a_bearer_header():
    with pytest.raises(Refused, match="Bearer"):
        Callers().principal(b"")


def test_the_scope_is_a_top_level_conjunct_no_filter_widens():
    p = Principal("alice", frozenset({"hr"}))
    f = Filter(scope_filter({"$or": [{"doc_id": "x"}, {"readers": {"$nin": ["hr"]}}]}, p, "nobody"))
    for record in ({"doc_id": "x", "readers": ("fin",)}, {"doc_id": "y", "readers": ()}):
        assert not f.matches(record)
    assert f.matches({"doc_id": "x", "readers": ("hr", "fin")})
    assert Filter(scope_filter(None, p, "everyone")).matches({"doc_id": "z", "readers": ()})
    assert not Filter(scope_filter(None, p, "nobody")).matches({"doc_id": "z", "readers": ()})


def test_serve_settings_refuse_an_api_key_beside_callers(tmp_path):
    with pytest.raises(ValueError, match="do not go together"):
        ServeSettings(api_key="k" * 40, access=AccessSettings(jwt_secret=SECRET))
    with pytest.raises(ValueError, match="need a keys file"):
        AccessSettings()
    with pytest.raises(DeclragError, match="shorter than 32 bytes"):
        AccessSettings(jwt_secret="short").build()
