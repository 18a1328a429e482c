"""A data row as the components see it: the composite's `columns` say where prompt, response and
the reference are; `route_by` names the routing column. One home for `rmspec score`, `rmspec run`
(fitting, validation) and the benchmark script."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rmspec.composite.outcome import Item
from rmspec.spec.composite import Composite


def item_from_row(row: dict[str, Any], composite: Composite) -> Item | str:
    """The row's Item, or why it cannot be scored (a reject reason)."""
    cols = composite.columns
    response = row.get(cols.response)
    if not isinstance(response, str):
        return f"column {cols.response!r} must hold the response text (got {type(response).__name__})"
    route = row.get(composite.route_by) if composite.route_by is not None else None
    return Item(row.get(cols.prompt), response, row.get(cols.label), None if route is None else str(route))


def read_items(
    path: str | Path, composite: Composite, limit: int | None = None
) -> tuple[list[Item], list[dict[str, Any]]]:
    """(items, rejects) of a row file; a reject names its file:line and the reason."""
    from rmspec.rows import open_rows

    items: list[Item] = []
    rejects: list[dict[str, Any]] = []
    for row in _limited(open_rows(path).rows, limit):
        where = f"{row.file}:{row.line}"
        if row.value is None:
            rejects.append({"where": where, "reason": str(row.error)})
            continue
        item = item_from_row(row.value, composite)
        if isinstance(item, str):
            rejects.append({"where": where, "reason": item})
        else:
            items.append(item)
    return items, rejects


def _limited(rows: Iterable[Any], limit: int | None) -> Iterator[Any]:
    for i, row in enumerate(rows):
        if limit is not None and i >= limit:
            return
        yield row
