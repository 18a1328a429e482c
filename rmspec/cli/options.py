"""Options shared by commands that read a spec."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rmspec.documents.base import DocumentKind

set_option = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY.PATH=VALUE",
    help="Override a spec value (typed as YAML), e.g. --set training.learning_rate=2e-5. Repeatable.",
)


class SpecPath(str):
    """A spec file as the user named it, with its document kind (rmspec.documents) asked once, when the
    argument was read: the training spec, or a document that trains nothing (a composite)."""

    kind: DocumentKind

    def __new__(cls, path: str, kind: DocumentKind) -> SpecPath:
        made = super().__new__(cls, path)
        made.kind = kind
        return made


class SpecFile(click.Path):
    """The SPEC_FILE argument: the command gets a SpecPath. `training_only="data preview"` refuses a
    document that trains nothing, saying what to run instead (its errors would be the training spec's
    keys, none of them the cause)."""

    def __init__(self, training_only: str | None = None) -> None:
        super().__init__(dir_okay=False)
        self.training_only = training_only

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> SpecPath:
        from rmspec import documents
        from rmspec.errors import RmspecError

        path = str(super().convert(value, param, ctx))
        kind = documents.of_file(path)
        if self.training_only is not None and not kind.trains:
            raise RmspecError(
                f"{path}: approach {kind.name} trains nothing (a spec of its own); `rmspec {self.training_only}` "
                "reads training specs",
                f"rmspec validate|plan|run {path}",
            )
        return SpecPath(path, kind)
