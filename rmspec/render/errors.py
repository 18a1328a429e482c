"""Rich view of user errors: each spec problem with the offending YAML lines and a marker."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from rmspec.errors import RmspecError, SpecError, SpecIssue
from rmspec.render.console import make_console

# A generated file gone wrong can hold thousands of problems; the first ones say what is wrong.
MAX_SHOWN = 50
SNIPPET_WIDTH = 160  # characters of a source line shown around the column


def stderr_console() -> Console:
    # Tests and CI read plain text; a terminal gets colour; never wrapped at 80 columns in a pipe.
    return make_console(stderr=True)


def _snippet(issue: SpecIssue, cache: dict[str, list[str] | None]) -> Text | None:
    if issue.file is None or issue.line is None or issue.file.startswith("--set"):
        return None
    if issue.file not in cache:
        try:
            # The file may be the broken one (not UTF-8, binary): show what can be shown.
            cache[issue.file] = Path(issue.file).read_bytes().decode("utf-8", errors="replace").splitlines()
        except OSError:
            cache[issue.file] = None
    lines = cache[issue.file]
    if not lines or issue.line > len(lines):
        return None
    col = issue.col or 1
    # A very long line is cut to a window around the column, the caret kept under it.
    left = max(0, col - 1 - SNIPPET_WIDTH // 2)
    out = Text()
    start = max(1, issue.line - 1)
    for n in range(start, issue.line + 1):
        out.append(f"  {n:>4} | ", style="dim")
        shown = lines[n - 1][left : left + SNIPPET_WIDTH]
        out.append(shown + "\n", style="bold" if n == issue.line else "")
    out.append("       | " + " " * (col - 1 - left) + "^\n", style="red bold")
    return out


def print_error(exc: RmspecError, console: Console | None = None, *, show_all: bool = False) -> None:
    """Print a user error; a SpecError shows its first MAX_SHOWN problems unless ``show_all``
    (or the error's own ``show_all``, set by `rmspec validate --all`)."""
    console = console or stderr_console()
    if not isinstance(exc, SpecError):
        console.print(Text("error: ", style="red bold") + Text(exc.message))
        if exc.hint:
            console.print(Text("  hint: ", style="yellow") + Text(exc.hint))
        return
    cache: dict[str, list[str] | None] = {}
    n = len(exc.issues)
    console.print(Text(f"error: {n} problem{'s' if n != 1 else ''} in the spec", style="red bold"))
    shown = exc.issues if (show_all or getattr(exc, "show_all", False)) else exc.issues[:MAX_SHOWN]
    for issue in shown:
        head = Text(issue.location(), style="cyan")
        if issue.path:
            head += Text(" " + issue.path, style="bold")
        head += Text(": " + issue.message)
        console.print(head)
        snippet = _snippet(issue, cache)
        if snippet is not None:
            console.print(snippet, end="")
        if issue.hint:
            console.print(Text("    hint: ", style="yellow") + Text(issue.hint))
    if len(shown) < n:
        console.print(Text(f"and {n - len(shown):,} more (rmspec validate --all shows every one)", style="yellow"))


def print_notes(notes: list[SpecIssue], console: Console | None = None) -> None:
    """Located notes on a spec that passes (what `run` here would still need), on stderr."""
    console = console or stderr_console()
    for note in notes:
        head = Text("note: ", style="yellow") + Text(note.location(), style="cyan")
        console.print(head + Text(f" {note.path}: {note.message}"))
        if note.hint:
            console.print(Text("    hint: ", style="yellow") + Text(note.hint))
