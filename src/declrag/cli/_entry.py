"""`declrag` on the command line: a thin layer over the Python API.

Every `DeclragError` becomes a two-line message (what is wrong, how to fix it) and exit status 2;
Ctrl-C exits with 130 after the store's last commit, which is always complete.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

import typer

from ..errors import DeclragError
from . import _access, _data, _mcp_serving, _quality, _query, _serving, _usage  # noqa: F401  (each registers its commands)
from ._app import app
from ._common import err

# the order `declrag --help` lists the commands in: the order of work, not of the modules that define them
ORDER = ("version", "index", "synth", "search", "ask", "serve", "mcp", "eval", "datasets", "init", "compile")
app.registered_commands.sort(key=lambda c: ORDER.index(c.name or c.callback.__name__)  # type: ignore[union-attr]
                             if (c.name or getattr(c.callback, "__name__", "")) in ORDER else len(ORDER))


def _own_process(lms: bool = True) -> None:
    """The settings the `declrag` command makes for its whole process (a library import makes none): every
    process-wide cache bounded by `declrag.runtime.cache_limits.CacheLimits`' defaults (serve, compile and eval take
    flags for
    each), traces where the environment asks for them (`declrag.runtime.tracing`), and, for commands that call LMs,
    DSPy's
    response cache under declrag's cache folder and LiteLLM's feedback banner off (errors are ours to word). Made
    when a command starts to run, after its arguments parsed: `--help`, `--version` and usage errors import none of
    DSPy, LiteLLM or torch and answer at once, and commands that call no LM never import DSPy."""
    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..runtime import tracing

    tracing.configure()  # traces where the environment names an OTLP receiver (OTEL_EXPORTER_OTLP_ENDPOINT)
    if not lms:
        # imported here, not at the top: `declrag` starts without loading what other commands need
        from ..runtime.cache_limits import CacheLimits, set_current

        set_current(CacheLimits())
        return
    import litellm

    # imported here, not at the top: `declrag` starts without loading what other commands need
    from ..lm import use_cache_limits

    litellm.suppress_debug_info = True
    use_cache_limits()


LIGHT = ("version", "datasets", "init")  # commands that touch no LM, embedding or cache: nothing to set up
NO_LM = ("index", "search", "indexes", "usage")  # commands that call no LM: the embedding cache's bound only


def _command_tree() -> Any:
    """The click command tree typer builds from `app`, each command but the `LIGHT` ones set up by `_own_process`
    when it starts (click calls a command's callback after its arguments parsed), and its flags shown without a
    value type."""
    root = typer.main.get_command(app)

    def wrap(cmd: Any, path: tuple[str, ...]) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            wrap(sub, (*path, name))
        if path and path[0] not in LIGHT and not getattr(cmd, "commands", None) and cmd.callback is not None:
            cmd.callback = functools.partial(_set_up_then, cmd.callback, path[0] not in NO_LM)
        # a flag takes no value: its help shows none (typer's rich help would show "<bool>")
        help_option = cmd.get_help_option(cmd.context_class(cmd, info_name=path[-1] if path else "declrag"))
        for param in [*cmd.params, *([help_option] if help_option is not None else [])]:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""

    wrap(root, ())
    return root


def _set_up_then(callback: Any, lms: bool, *args: Any, **kwargs: Any) -> Any:
    _own_process(lms)
    return callback(*args, **kwargs)


INTERRUPTED = 130  # Ctrl-C: typer >= 0.2x turns KeyboardInterrupt into Exit(130) itself, older ones into Abort


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    click_error, no_args = _click_errors()
    try:  # what `app(...)` runs, with each command's set-up after its parsing
        code = _command_tree()(args=argv, standalone_mode=False)  # ctx.exit()'s code, else the command's value
        code = code if isinstance(code, int) else 0
    except DeclragError as e:
        err.print(f"error: {e.message}", markup=False, highlight=False)
        if e.hint:
            err.print(f"  fix: {e.hint}", markup=False, highlight=False)
        return 2
    except (KeyboardInterrupt, typer.Abort):
        code = INTERRUPTED
    except typer.Exit as e:
        code = e.exit_code
    except click_error as e:
        if no_args is not None and isinstance(e, no_args):  # `declrag`, `declrag bench`: the help, as click shows it
            err.print(e.format_message(), markup=False, highlight=False)
        else:
            err.print(usage_line(e, sys.argv[1:] if argv is None else argv), markup=False, highlight=False)
        return e.exit_code
    if code == INTERRUPTED:
        err.print("interrupted: everything committed before this point is kept; rerun to continue "
                  "(declrag synth: with --resume)")
    return code


def _click_errors() -> tuple[Any, Any]:  # (ClickException, NoArgsIsHelpError or None): classes typer picks
    """The usage-error classes of the click that typer parses with: typer >= 0.2x carries its own copy
    (``typer._click``), older typers raise the click package's; `typer.BadParameter` is one of them either way."""
    exceptions = sys.modules[typer.BadParameter.__module__]
    return exceptions.ClickException, getattr(exceptions, "NoArgsIsHelpError", None)


def usage_line(e: Exception, argv: list[str]) -> str:
    """A click usage error as one line: what is wrong, and the help to read (that of the command being parsed)."""
    message = " ".join(str(e.format_message()).split())  # type: ignore[attr-defined]
    ctx = getattr(e, "ctx", None)
    return f"error: {message} (see: {ctx.command_path if ctx is not None else _command_path(argv)} --help)"


def _command_path(argv: list[str]) -> str:
    """The command that ``argv`` names (``declrag eval`` for ``eval --threads``), for errors that come without it."""
    cmd, path = typer.main.get_command(app), ["declrag"]
    for arg in argv:
        sub = getattr(cmd, "commands", {}).get(arg)
        if sub is None:
            break
        cmd, path = sub, [*path, arg]
    return " ".join(path)


if __name__ == "__main__":
    sys.exit(main())
