"""What every `declrag` command module shares: the consoles and option parsing. `cli` builds the command
tree and imports the command modules (`cli_bench`); they import only this, so no module imports back."""

from __future__ import annotations

from pydantic import ValidationError
from rich.console import Console

from .errors import DeclragError

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def config_from(cls, **fields):
    """Build a pydantic config from CLI options (None: not given), turning validation errors into
    DeclragErrors."""
    try:
        return cls(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first["loc"])) or cls.__name__
        raise DeclragError(f"invalid option {where}: {first['msg']}", hint="see --help for allowed values") from e
