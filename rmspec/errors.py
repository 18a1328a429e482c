"""One small hierarchy of user-facing errors.

Every error a user can cause (a bad spec, bad data, a plan that cannot fit) is an
``RmspecError``: the CLI prints it without a traceback and exits with ``exit_code``
(2 for a mistake of the user's, 1 for a failure of the run itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class RmspecError(Exception):
    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render_plain(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


@dataclass
class SpecIssue:
    """One problem in a spec, located in its source file."""

    path: str  # dotted field path, e.g. "training.learning_rate"
    message: str  # what is wrong, with expected/got where known
    file: str | None = None
    line: int | None = None  # 1-based
    col: int | None = None  # 1-based
    hint: str | None = None

    def location(self) -> str:
        if self.file is None:
            return "<spec>"
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.col or 1}"

    def render_plain(self) -> str:
        field_path = f" {self.path}" if self.path else ""
        text = f"{self.location()}{field_path}: {self.message}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


class SpecError(RmspecError):
    """All problems of a spec at once."""

    show_all: bool = False  # `rmspec validate --all`: print every problem (read by rmspec.render.errors)

    def __init__(self, issues: list[SpecIssue]):
        self.issues = issues
        lines = [issue.render_plain() for issue in issues]
        count = f"{len(issues)} problem{'s' if len(issues) != 1 else ''} in the spec"
        super().__init__(count + ":\n" + "\n".join(lines))

    def render_plain(self) -> str:
        return "error: " + self.message


class PlanError(RmspecError):
    """The spec is valid but no plan fits, or the plan file is stale."""


class DataError(RmspecError):
    """The data cannot be read or mapped as the spec says."""


class RunError(RmspecError):
    """The run itself failed (not the user's input)."""

    exit_code = 1


@dataclass
class IssueList:
    """Collects issues; raise once at the end."""

    issues: list[SpecIssue] = field(default_factory=list)

    def add(self, issue: SpecIssue) -> None:
        self.issues.append(issue)

    def raise_if_any(self) -> None:
        if self.issues:
            raise SpecError(self.issues)
