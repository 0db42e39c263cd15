"""Where a Weaviate store lives: the parsed ``weaviate://`` URI and the connection to its server, with the
one-line errors for an unreachable server, refused credentials and a server too old for the client."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

from ..errors import DeclragError

DEFAULT_COLLECTION = "Declrag"
DOCS_SUFFIX = "_docs"
MIN_SERVER = (1, 27, 0)
_NAME = re.compile(r"^[A-Z][_0-9A-Za-z]*$")
OPTIONS = ("grpc", "api_key_env", "index", "ef", "ef_construction", "max_connections", "compression", "replicas",
           "shards", "consistency", "retries", "timeout", "settle", "metrics")
HNSW_ONLY = ("ef", "ef_construction", "max_connections")
# the vector index settings a store URI may ask for: (lowest, highest) as the server accepts them, Weaviate's
# own limits where it has them (maxConnections 4..2047, efConstruction >= 4); the upper bounds of ef and
# ef_construction only catch typos (the server has none)
RANGES = {"ef": (1, 100_000), "ef_construction": (4, 100_000), "max_connections": (4, 2047)}
COMPRESSIONS = {"hnsw": ("none", "pq", "bq", "sq"), "flat": ("none", "bq")}


@dataclass(frozen=True)
class Target:
    """A parsed ``weaviate://`` URI."""

    secure: bool
    host: str
    port: int
    collection: str
    grpc: int = 50051
    api_key_env: str = "WEAVIATE_API_KEY"
    index: str | None = None  # None: flat for a new collection, whatever an existing one has
    ef: int | None = None  # None: the server's default (-1, dynamic ef); likewise below
    ef_construction: int | None = None
    max_connections: int | None = None
    compression: str | None = None
    replicas: int = 1
    shards: int = 1
    consistency: str | None = None
    retries: int = 3
    timeout: float = 60.0
    settle: float = 65.0
    metrics: int | None = None  # the server's Prometheus port (read by the retrieval bench's breakdown only)

    @classmethod
    def parse(cls, uri: str) -> Target:
        u = urlsplit(uri)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        known = set(OPTIONS)
        if bad := sorted(set(q) - known):
            raise DeclragError(f"store {uri}: unknown option {bad[0]!r}", hint=f"options: {', '.join(sorted(known))}")
        if u.username or u.password:
            raise DeclragError(f"store {uri}: credentials do not belong in the URI",
                               hint="put the API key in $WEAVIATE_API_KEY (or the variable named by ?api_key_env=)")
        name = u.path.strip("/") or DEFAULT_COLLECTION
        name = name[:1].upper() + name[1:]  # Weaviate capitalises the first letter itself
        if not _NAME.match(name) or name.endswith(DOCS_SUFFIX):
            raise DeclragError(f"store {uri}: {name!r} is not a usable collection name",
                               hint=f"letters, digits and _, starting with a letter, not ending in {DOCS_SUFFIX}")
        ints = {k: _int(uri, k, q[k]) for k in ("ef", "ef_construction", "max_connections", "metrics") if k in q}
        try:
            t = cls(secure=u.scheme.lower() == "weaviates", host=u.hostname or "localhost",
                    port=u.port or (443 if u.scheme.lower() == "weaviates" else 8080), collection=name,
                    grpc=int(q.get("grpc", 50051)), api_key_env=q.get("api_key_env", "WEAVIATE_API_KEY"),
                    index=q["index"].lower() if "index" in q else None, ef=ints.get("ef"),
                    ef_construction=ints.get("ef_construction"), max_connections=ints.get("max_connections"),
                    compression=q["compression"].lower() if "compression" in q else None,
                    replicas=int(q.get("replicas", 1)), shards=int(q.get("shards", 1)),
                    consistency=q.get("consistency", "").upper() or None, retries=int(q.get("retries", 3)),
                    timeout=float(q.get("timeout", 60)), settle=float(q.get("settle", 65)), metrics=ints.get("metrics"))
        except ValueError as e:
            raise DeclragError(f"store {uri}: {e}", hint="ports, replicas, shards and retries are integers") from e
        if t.index not in (None, "flat", "hnsw"):
            raise DeclragError(f"store {uri}: index must be flat or hnsw, not {t.index!r}")
        for k in HNSW_ONLY:
            v = getattr(t, k)
            if v is not None and t.index != "hnsw":
                raise DeclragError(f"store {uri}: {k} is a setting of the hnsw index",
                                   hint="add index=hnsw to the URI (the default index, flat, is an exact scan)")
            lo, hi = RANGES[k]
            if v is not None and not lo <= v <= hi and not (k == "ef" and v == -1):
                raise DeclragError(f"store {uri}: {k} must be between {lo} and {hi}"
                                   f"{' (or -1, dynamic)' if k == 'ef' else ''}, not {v}")
        if t.compression is not None:
            allowed = COMPRESSIONS[t.index or "flat"]
            if t.compression not in allowed:
                raise DeclragError(f"store {uri}: compression on the {t.index or 'flat'} index must be one of "
                                   f"{', '.join(allowed)}, not {t.compression!r}",
                                   hint="pq, bq and sq are for index=hnsw; the flat index takes bq")
        if t.metrics is not None and not 0 < t.metrics < 65536:
            raise DeclragError(f"store {uri}: metrics must be a port number, not {t.metrics}")
        if t.consistency not in (None, "ONE", "QUORUM", "ALL"):
            raise DeclragError(f"store {uri}: consistency must be ONE, QUORUM or ALL")
        if t.replicas < 1 or t.shards < 1 or t.retries < 0:
            raise DeclragError(f"store {uri}: replicas and shards must be at least 1, retries at least 0")
        return t

    @property
    def base(self) -> str:
        return f"{'weaviates' if self.secure else 'weaviate'}://{self.host}:{self.port}"

    def uri(self, collection: str | None = None) -> str:
        d = Target.__dataclass_fields__
        q = {k: getattr(self, k) for k in OPTIONS if getattr(self, k) != d[k].default}
        if self.grpc != 50051 or "grpc" in q:
            q["grpc"] = self.grpc
        return f"{self.base}/{collection or self.collection}" + (f"?{urlencode(q)}" if q else "")


def _int(uri: str, key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise DeclragError(f"store {uri}: {key} must be an integer, not {value!r}") from None


def _connect(t: Target):
    import weaviate
    from weaviate.classes.init import AdditionalConfig, Auth, Timeout

    key = os.environ.get(t.api_key_env) or None
    where = f"{t.base} (gRPC port {t.grpc})"
    try:
        client = weaviate.connect_to_custom(
            http_host=t.host, http_port=t.port, http_secure=t.secure, grpc_host=t.host, grpc_port=t.grpc,
            grpc_secure=t.secure, auth_credentials=Auth.api_key(key) if key else None, skip_init_checks=True,
            additional_config=AdditionalConfig(timeout=Timeout(init=10, query=t.timeout, insert=max(t.timeout, 120))))
    except Exception as e:  # the client raises several kinds here: refused credentials, or not reachable
        if _status(e) in (401, 403):
            raise _auth(t, e) from e
        raise _unreachable(where, e) from e
    try:
        if not client.is_ready():
            raise _unreachable(where, None)
        version = client.get_meta().get("version", "0")
    except DeclragError:
        client.close()
        raise
    except Exception as e:
        client.close()
        if _status(e) in (401, 403):
            raise _auth(t, e) from e
        raise _unreachable(where, e) from e
    parts = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
    if parts < MIN_SERVER:
        client.close()
        raise DeclragError(f"the Weaviate server at {t.base} is version {version}; declrag needs "
                           f"{'.'.join(map(str, MIN_SERVER))} or newer", hint="upgrade the server")
    return client


def _unreachable(where: str, e: Exception | None) -> DeclragError:
    why = f": {str(e).splitlines()[0][:200]}" if e is not None and str(e) else ""
    return DeclragError(f"cannot reach a Weaviate server at {where}{why}",
                        hint="start one (bash scripts/weaviate.sh start, or the official container image "
                             "cr.weaviate.io/semitechnologies/weaviate) or fix the host/port in the store URI")


def _auth(t: Target, e: BaseException) -> DeclragError:
    have = "is set" if os.environ.get(t.api_key_env) else "is not set"
    return DeclragError(f"the Weaviate server at {t.base} refused the credentials (${t.api_key_env} {have})",
                        hint=f"export {t.api_key_env}=<an API key the server accepts>, or name another variable "
                             "with ?api_key_env=")


_GRPC_AS_HTTP = {"UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403}


def _status(e: BaseException | None) -> int | None:
    """The HTTP status behind a client error, looking through the exceptions it wraps."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(code := getattr(e, "status_code", None), int):
            return code
        if callable(grpc_code := getattr(e, "code", None)):  # a gRPC call's error: its status, as HTTP's
            try:
                name = getattr(grpc_code(), "name", "")
            except Exception:
                name = ""
            if name in _GRPC_AS_HTTP:
                return _GRPC_AS_HTTP[name]
        if m := re.search(r"status code: (\d{3})", str(e)):
            return int(m.group(1))
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None
