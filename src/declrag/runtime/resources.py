"""Where declrag finds its declarations: prompt variants (``signatures``), search spaces (``optimizers``) and
dataset declarations (``datasets``). One lookup for the three kinds, earlier places winning: an explicit path,
``$DECLRAG_<KIND>``, ``./<kind>``, then the packaged defaults (docs/guides/configuration.md). A file is named by
its stem; a path that does not exist but whose file name is ``NAME.yaml`` resolves as ``NAME`` would, so
``--space optimizers/retrieval.yaml`` works from any folder.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources as _res
from pathlib import Path
from typing import Literal

from ..errors import DeclragError

Kind = Literal["signatures", "optimizers", "datasets"]
KINDS: tuple[Kind, ...] = ("signatures", "optimizers", "datasets")
ENV: dict[str, str] = {k: f"DECLRAG_{k.upper()}" for k in KINDS}
SUFFIXES = (".yaml", ".yml")
_CHECKOUT = Path(__file__).resolve().parents[3]  # the source checkout's root, for an editable install


def _packaged(sub: str) -> Path | None:
    """``declrag/<sub>`` inside the installed package, as a folder on disk, or None."""
    try:
        p = _res.files("declrag").joinpath(*sub.split("/"))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - declrag is importable by definition
        return None
    return Path(str(p)) if isinstance(p, Path) and p.is_dir() else None


def _in_checkout(name: str) -> Path | None:
    d = _CHECKOUT / name
    return d if (_CHECKOUT / "pyproject.toml").is_file() and d.is_dir() else None


def default_dir(kind: Kind) -> Path | None:
    """The packaged defaults of ``kind``: ``declrag/defaults/<kind>`` in an installed wheel, else the source
    checkout's top-level folder (editable install); None when neither exists."""
    _check(kind)
    return _packaged(f"defaults/{kind}") or _in_checkout(kind)


def user_dirs(kind: Kind) -> list[Path]:
    """``$DECLRAG_<KIND>`` (os.pathsep-separated), then ``./<kind>`` in the current folder."""
    _check(kind)
    return [Path(p).expanduser() for p in os.environ.get(ENV[kind], "").split(os.pathsep) if p] + [Path.cwd() / kind]


def search_dirs(kind: Kind) -> list[Path]:
    """Every folder looked in for ``kind``, in order (earlier wins), each once; they need not exist."""
    dirs = user_dirs(kind) + ([d] if (d := default_dir(kind)) else [])
    unique: dict[Path, Path] = {}
    for d in dirs:
        unique.setdefault(d.resolve(), d)
    return list(unique.values())


def files(kind: Kind) -> dict[str, Path]:
    """Name (file stem) -> file, over ``search_dirs(kind)``; earlier folders win."""
    found: dict[str, Path] = {}
    for d in search_dirs(kind):
        if d.is_dir():
            for f in sorted(d.iterdir()):
                if f.suffix in SUFFIXES and f.is_file():
                    found.setdefault(f.stem, f)
    return found


def looks_like_path(name: str | os.PathLike) -> bool:
    s = str(name)
    return "/" in s or os.sep in s or Path(s).suffix in SUFFIXES


def find(kind: Kind, name: str | os.PathLike) -> Path:
    """The file for ``name``: an existing path as given; else the file named ``NAME`` (or, for a path that does
    not exist, its file name's stem) in ``search_dirs(kind)``. A miss lists what is available and where."""
    _check(kind)
    p = Path(name).expanduser()
    if looks_like_path(name) and p.is_file():
        return p
    stem = p.stem if p.suffix in SUFFIXES else p.name
    known = files(kind)
    if stem in known:
        return known[stem]
    where = ", ".join(str(d) for d in search_dirs(kind))
    what = f"no file {p}, and no {stem}.yaml" if looks_like_path(name) else f"no {stem}.yaml"
    raise DeclragError(f"{what} among the {kind} in {where}; available: {', '.join(sorted(known)) or 'none'}",
                       hint=f"pass a path to a YAML file, a name above, or add {stem}.yaml to ./{kind} or "
                            f"${ENV[kind]} (`declrag init` copies the defaults there)")


def init(folder: str | os.PathLike = ".", *, force: bool = False,
         kinds: tuple[Kind, ...] = KINDS) -> tuple[list[Path], list[Path]]:
    """Copy the packaged defaults into ``folder/<kind>/`` for editing. Returns (written, skipped): an existing
    file is skipped unless ``force``. Run in a project folder, these then win over the packaged defaults."""
    root = Path(folder)
    written: list[Path] = []
    skipped: list[Path] = []
    for kind in kinds:
        src = default_dir(kind)
        if src is None:
            raise DeclragError(f"no packaged {kind} to copy", hint="reinstall declrag (its wheel ships them)")
        dest = root / kind
        if src.resolve() == dest.resolve():
            raise DeclragError(f"{dest.resolve()} is where the defaults already live (the source checkout)",
                               hint="run `declrag init` in another folder, or pass one: declrag init my-project")
        for f in sorted(src.iterdir()):
            if not f.is_file() or (f.suffix not in SUFFIXES and f.name != "README.md"):
                continue
            target = dest / f.name
            if target.exists() and not force:
                skipped.append(target)
                continue
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
            written.append(target)
    return written, skipped


def _check(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown resource kind {kind!r}; one of {KINDS}")
