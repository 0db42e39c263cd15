"""declrag keys: the callers of `declrag serve --keys` (`declrag.access._keys`); and `--as NAME` for ask and search."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ..errors import DeclragError
from ._app import app
from ._common import config_from, out

if TYPE_CHECKING:  # annotations only: the CLI starts without loading what a command needs
    from ..access import Access, Principal

keys_app = typer.Typer(no_args_is_help=True, help="Callers of `declrag serve --keys FILE`: each a name, groups and a "
                                                  "key (kept as its SHA-256).")
app.add_typer(keys_app, name="keys")
KeysFileOpt = Annotated[Path, typer.Option("--file", help="the keys file (YAML)")]
DEFAULT_KEYS = Path("keys.yaml")
AsOpt = Annotated[str | None, typer.Option(
    "--as", help="answer as this caller of the keys file (--keys) sees it: only the documents their groups may read")]
KeysOpt = Annotated[Path, typer.Option("--keys", help="the keys file that names the caller of --as")]
UnlabelledOpt = Annotated[str, typer.Option(
    help="with callers (or --as): who reads documents indexed without readers: everyone | nobody")]
ReadersOpt = Annotated[str | None, typer.Option(
    help="the groups that may read these documents, comma-separated ('*': everyone); changing them relabels, "
         "embeds nothing (docs/guides/access.md)")]
ReadersFileOpt = Annotated[Path | None, typer.Option(
    help="a YAML file of file patterns -> groups, first match first (docs/guides/access.md)")]
CallersKeysOpt = Annotated[Path | None, typer.Option(
    "--keys", help="callers' keys file (`declrag keys add`): each caller sees only the documents their groups may "
                   "read (docs/guides/access.md)")]
JwksOpt = Annotated[str | None, typer.Option(
    help="callers' bearer JWTs, checked against this JWKS (a file, or the identity provider's https URL)")]
JwtSecretFileOpt = Annotated[Path | None, typer.Option(
    help="callers' bearer JWTs, checked with the shared secret (HS256) in this file")]
JwtIssuerOpt = Annotated[str | None, typer.Option(help="with JWTs: the issuer (iss) they must name")]
JwtAudienceOpt = Annotated[str | None, typer.Option(help="with JWTs: the audience (aud) they must name")]
GroupsClaimOpt = Annotated[str, typer.Option(
    help="with JWTs: the claim holding the caller's groups (a dotted path for a nested one)")]


@keys_app.command("add")
def keys_add(name: Annotated[str, typer.Argument(help="the caller's name")],
             groups: Annotated[str, typer.Option(help="the groups they belong to, comma-separated")],
             file: KeysFileOpt = DEFAULT_KEYS,
             key: Annotated[str | None, typer.Option(
                 help="use this key (at least 32 characters) instead of a new random one")] = None):
    """Add a caller; their key is printed once (the file keeps only its SHA-256)."""
    from ..access import KeysFile  # here, not at the top: start-up time

    made = KeysFile.load(file, missing_ok=True).add(name, groups, key)
    out.print(made, markup=False, highlight=False)
    typer.echo(f"added {name} to {file}; the key above is shown once: give it to them "
               "(they send 'Authorization: Bearer <key>')", err=True)


@keys_app.command("list")
def keys_list(file: KeysFileOpt = DEFAULT_KEYS):
    """The callers of a keys file and their groups."""
    from ..access import KeysFile  # here, not at the top: start-up time

    t = Table(title=f"callers in {file}")
    t.add_column("name")
    t.add_column("groups")
    for e in KeysFile.load(file).entries:
        t.add_row(e.name, ", ".join(e.groups))
    out.print(t)


@keys_app.command("rm")
def keys_rm(name: Annotated[str, typer.Argument(help="the caller's name")], file: KeysFileOpt = DEFAULT_KEYS):
    """Remove a caller (their key stops working when the server reads the file again: at its next start)."""
    from ..access import KeysFile  # here, not at the top: start-up time

    KeysFile.load(file).remove(name)
    typer.echo(f"removed {name} from {file}", err=True)


def caller_named(name: str | None, keys: Path, unlabelled: str) -> tuple[Access | None, Principal | None]:
    """``--as NAME``: the access of a keys file and its caller ``name``, as a server with those callers would know
    them; ``(None, None)`` without ``name``. Raises `DeclragError` for an unknown caller, a bad keys file or policy."""
    if name is None:
        return None, None
    from ..access import Access, Callers, KeysFile  # here, not at the top: start-up time

    if unlabelled not in ("everyone", "nobody"):
        raise DeclragError(f"--unlabelled {unlabelled!r}: use everyone or nobody")
    found = KeysFile.load(keys)
    principal = found.named(name)
    if principal is None:
        raise DeclragError(f"{keys} has no caller named {name!r}", hint=f"see `declrag keys list --file {keys}`")
    return Access(Callers(found, None), unlabelled), principal  # type: ignore[arg-type]  # checked above


def as_caller(name: str | None, keys: Path, unlabelled: str, where: dict[str, Any] | None) -> dict[str, Any] | None:
    """``where`` narrowed to what the caller ``name`` of the keys file may read (None: ``where`` as it is), for a
    search of the store itself (`declrag search`). Raises as `caller_named`."""
    access, principal = caller_named(name, keys, unlabelled)
    return where if access is None or principal is None else access.scope(where, principal)


def access_settings(keys: Path | None, jwks: str | None, secret_file: Path | None, issuer: str | None,
                    audience: str | None, groups_claim: str, unlabelled: str):
    """`serve`'s and `mcp`'s callers (`declrag.access.AccessSettings`) from their flags; None when none names any."""
    from ..access import AccessSettings  # here, not at the top: start-up time

    if keys is None and jwks is None and secret_file is None:
        if issuer or audience or groups_claim != "groups" or unlabelled != "everyone":
            raise DeclragError("--jwt-issuer, --jwt-audience, --groups-claim and --unlabelled go with callers",
                               hint="give --keys FILE, --jwks FILE|URL or --jwt-secret-file FILE")
        return None
    secret = None
    if secret_file is not None:
        try:
            secret = secret_file.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise DeclragError(f"cannot read --jwt-secret-file {secret_file}: {e.strerror or e}",
                               hint="give the file holding the identity provider's shared secret") from None
    return config_from(AccessSettings, keys_file=keys, jwks=jwks, jwt_secret=secret, jwt_issuer=issuer,
                       jwt_audience=audience, groups_claim=groups_claim, unlabelled=unlabelled)


def readers_from(file: Path | None, groups: str | None):
    """`index`'s labelling (`declrag.ingest.readers.Readers`) from ``--readers-file`` and ``--readers``, checked."""
    from ..ingest.readers import Readers  # here, not at the top: start-up time

    return Readers.load(file, groups)
