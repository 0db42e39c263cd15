"""`declrag` on the command line: a thin layer over the Python API. `entry` runs a command (`main`) and words its
errors; each command lives in the module named after its group of work (`access`, `data`, `query`, `quality`,
`serving`, `mcp_serving`, `usage`), on the one Typer `app` (`app`)."""

from ._entry import app, main, usage_line

__all__ = ["app", "main", "usage_line"]
