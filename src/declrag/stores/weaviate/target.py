"""Where a Weaviate store lives: the parsed ``weaviate://`` URI and the connection to its server, with the
one-line errors for an unreachable server, refused credentials and a server too old for the client."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from ...errors import DeclragError

DEFAULT_COLLECTION = "Declrag"
DOCS_SUFFIX = "_docs"
MIN_SERVER = (1, 27, 0)
_NAME = re.compile(r"^[A-Z][_0-9A-Za-z]*$")
OPTIONS = ("grpc", "nodes", "api_key_env", "index", "ef", "ef_construction", "max_connections", "compression",
           "replicas", "shards", "consistency", "retries", "timeout", "settle")
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
    #: every node the URI names, (host, REST port, gRPC port), the first being host/port/grpc above; a handle
    #: fails over from one to the next when the one it talks to stops answering (see WeaviateStore._call)
    nodes: tuple[tuple[str, int, int], ...] = ()

    @classmethod
    def parse(cls, uri: str) -> Target:
        u = urlsplit(uri)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        nodes = _nodes(uri, u.scheme.lower() == "weaviates", u.netloc.rpartition("@")[2], q)
        q["grpc"] = str(nodes[0][2])
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
        ints = {k: _int(uri, k, q[k]) for k in ("ef", "ef_construction", "max_connections") if k in q}
        try:
            t = cls(secure=u.scheme.lower() == "weaviates", host=nodes[0][0], port=nodes[0][1], collection=name,
                    grpc=int(q.get("grpc", 50051)), api_key_env=q.get("api_key_env", "WEAVIATE_API_KEY"),
                    index=q["index"].lower() if "index" in q else None, ef=ints.get("ef"),
                    ef_construction=ints.get("ef_construction"), max_connections=ints.get("max_connections"),
                    compression=q["compression"].lower() if "compression" in q else None,
                    replicas=int(q.get("replicas", 1)), shards=int(q.get("shards", 1)),
                    consistency=q.get("consistency", "").upper() or None, retries=int(q.get("retries", 3)),
                    timeout=float(q.get("timeout", 60)), settle=float(q.get("settle", 65)),
                    nodes=nodes)
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
        if t.consistency not in (None, "ONE", "QUORUM", "ALL"):
            raise DeclragError(f"store {uri}: consistency must be ONE, QUORUM or ALL")
        if t.replicas < 1 or t.shards < 1 or t.retries < 0:
            raise DeclragError(f"store {uri}: replicas and shards must be at least 1, retries at least 0")
        return t

    @property
    def base(self) -> str:
        hosts = ",".join(f"{h}:{p}" for h, p, _ in self.nodes) or f"{self.host}:{self.port}"
        return f"{'weaviates' if self.secure else 'weaviate'}://{hosts}"

    def node(self, i: int) -> str:
        """Node ``i`` as a URI base (for messages)."""
        h, p, g = self.nodes[i]
        return f"{'weaviates' if self.secure else 'weaviate'}://{h}:{p} (gRPC port {g})"

    def uri(self, collection: str | None = None) -> str:
        d = Target.__dataclass_fields__
        q: dict[str, Any] = {k: getattr(self, k) for k in OPTIONS if k not in ("grpc", "nodes")
                             and getattr(self, k) != d[k].default}
        grpcs = [g for _, _, g in self.nodes] or [self.grpc]
        if len(grpcs) > 1 and grpcs != [self.grpc + p - self.port for _, p, _ in self.nodes]:
            q["grpc"] = ",".join(map(str, grpcs))
        elif self.grpc != 50051:
            q["grpc"] = self.grpc
        q = {"grpc": q.pop("grpc"), **q} if "grpc" in q else q
        return f"{self.base}/{collection or self.collection}" + (f"?{urlencode(q, safe=',')}" if q else "")


def _nodes(uri: str, secure: bool, netloc: str, q: dict[str, str]) -> tuple[tuple[str, int, int], ...]:
    """The nodes a URI names: ``host:port`` entries separated by commas in its address, then those of the
    ``nodes=`` option; their gRPC ports from ``grpc=``, one per node or one for the first, the others at the
    same distance from their REST port (as scripts/weaviate.sh numbers a cluster's ports)."""
    entries = [e for e in netloc.split(",") + q.get("nodes", "").split(",") if e.strip()] or ["localhost"]
    out: list[tuple[str, int]] = []
    for e in entries:
        e = e.strip()
        host, _, port = e.rpartition(":") if not e.endswith("]") else (e, "", "")
        if not host or "]" in port:
            host, port = e, ""
        try:
            n = int(port) if port else (443 if secure else 8080)
        except ValueError:
            raise DeclragError(f"store {uri}: {e!r} is not a host:port",
                               hint="name the nodes as weaviate://host1:port1,host2:port2/Collection") from None
        if (host.strip("[]"), n) not in out:
            out.append((host.strip("[]"), n))
    raw = [g.strip() for g in q.get("grpc", "50051").split(",")]
    try:
        grpcs = [int(g) for g in raw]
    except ValueError:
        raise DeclragError(f"store {uri}: grpc ports are integers (one, or one per node), not {q['grpc']!r}") from None
    if len(grpcs) == 1:
        grpcs = [grpcs[0] + p - out[0][1] for _, p in out]
    if len(grpcs) != len(out) or not all(0 < g < 65536 for g in grpcs) or not all(0 < p < 65536 for _, p in out):
        raise DeclragError(f"store {uri}: {len(out)} node(s) and {len(raw)} gRPC port(s), or a port out of range",
                           hint="give grpc= one port (the first node's; the others' follow their REST ports) "
                                "or one port per node, in the nodes' order")
    return tuple((h, p, g) for (h, p), g in zip(out, grpcs))


def _int(uri: str, key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise DeclragError(f"store {uri}: {key} must be an integer, not {value!r}") from None


class Unreachable(DeclragError):
    """No answer from a Weaviate node (refused, reset, timed out): the one error a handle fails over on."""


def connect(t: Target, node: int = 0):
    """A client of node ``node`` of the target, checked ready and new enough."""
    import weaviate
    from weaviate.classes.init import AdditionalConfig, Auth, Timeout

    host, port, grpc_port = t.nodes[node] if t.nodes else (t.host, t.port, t.grpc)
    key = os.environ.get(t.api_key_env) or None
    where = f"{'weaviates' if t.secure else 'weaviate'}://{host}:{port} (gRPC port {grpc_port})"
    try:
        client = weaviate.connect_to_custom(
            http_host=host, http_port=port, http_secure=t.secure, grpc_host=host, grpc_port=grpc_port,
            grpc_secure=t.secure, auth_credentials=Auth.api_key(key) if key else None, skip_init_checks=True,
            additional_config=AdditionalConfig(timeout=Timeout(init=10, query=t.timeout, insert=max(t.timeout, 120))))
    except Exception as e:  # the client raises several kinds here: refused credentials, or not reachable
        if http_status(e) in (401, 403):
            raise auth_error(t, e) from e
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
        if http_status(e) in (401, 403):
            raise auth_error(t, e) from e
        raise _unreachable(where, e) from e
    parts = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
    if parts < MIN_SERVER:
        client.close()
        raise DeclragError(f"the Weaviate server at {where} is version {version}; declrag needs "
                           f"{'.'.join(map(str, MIN_SERVER))} or newer", hint="upgrade the server")
    return client


def connect_any(t: Target, first: int = 0):
    """(client, node): the first node, from ``first`` on round the list, that answers; `Unreachable` naming
    them all when none does."""
    n = max(len(t.nodes), 1)
    errors: list[Unreachable] = []
    for k in range(n):
        try:
            return connect(t, (first + k) % n), (first + k) % n
        except Unreachable as e:
            errors.append(e)
    if n == 1:
        raise errors[0]
    raise Unreachable(f"cannot reach any of the {n} Weaviate nodes of {t.base}: {errors[0].message}",
                      hint=errors[0].hint)


def _unreachable(where: str, e: Exception | None) -> DeclragError:
    why = f": {str(e).splitlines()[0][:200]}" if e is not None and str(e) else ""
    return Unreachable(f"cannot reach a Weaviate server at {where}{why}",
                       hint="start one (bash scripts/weaviate.sh start, or the official container image "
                            "cr.weaviate.io/semitechnologies/weaviate) or fix the host/port in the store URI")


def auth_error(t: Target, e: BaseException) -> DeclragError:
    have = "is set" if os.environ.get(t.api_key_env) else "is not set"
    return DeclragError(f"the Weaviate server at {t.base} refused the credentials (${t.api_key_env} {have})",
                        hint=f"export {t.api_key_env}=<an API key the server accepts>, or name another variable "
                             "with ?api_key_env=")


_GRPC_AS_HTTP = {"UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403}


def causes(e: BaseException | None) -> Iterator[BaseException]:
    """``e`` and the exceptions it wraps, outermost first (at most 10)."""
    for _ in range(10):
        if e is None:
            return
        yield e
        e = e.__cause__ or e.__context__


def grpc_status(e: BaseException) -> str:
    """A gRPC call's error: its status name (``UNAVAILABLE``...); "" for any other error."""
    if not callable(code := getattr(e, "code", None)):
        return ""
    try:
        return getattr(code(), "name", "")
    except Exception:
        return ""


def http_status(e: BaseException | None) -> int | None:
    """The HTTP status behind a client error (a gRPC status as HTTP's), looking through the exceptions it wraps."""
    for x in causes(e):
        if isinstance(code := getattr(x, "status_code", None), int):
            return code
        if (name := grpc_status(x)) in _GRPC_AS_HTTP:
            return _GRPC_AS_HTTP[name]
        if m := re.search(r"status code: (\d{3})", str(x)):
            return int(m.group(1))
    return None

