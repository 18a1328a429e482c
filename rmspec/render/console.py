"""The one way rmspec makes a rich Console: the terminal's width on a terminal, a wide page otherwise.

Rich falls back to 80 columns when its stream is not a terminal (a file, a pipe, a CI log) and then
wraps every long line, breaking paths and commands in two. Here a pipe gets ``WIDE`` columns (or
``COLUMNS`` when set), and plain prints never wrap (``soft_wrap``): a path or a command stays on one
line that a user can copy. Light: rich only.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from rich.console import Console

WIDE = 200  # columns for tables when the output is not a terminal: room for paths and spec keys


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def _width(stream: TextIO) -> int | None:
    """None on a terminal (rich asks the terminal, and follows a resize); else COLUMNS or WIDE."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if _is_terminal(stream) else WIDE


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): colour only on a terminal without NO_COLOR, no highlighting,
    plain prints never wrapped, tables as wide as the terminal or WIDE."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(
        stderr=stderr,
        width=_width(stream),
        highlight=False,
        soft_wrap=True,
        no_color=not _is_terminal(stream) or "NO_COLOR" in os.environ,
    )


def stdout_console() -> Console:
    return make_console()


def stderr_console() -> Console:
    return make_console(stderr=True)
