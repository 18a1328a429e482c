"""Small HTML pieces of the report: escaping, percentages, tables, embedded images."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any


def esc(value: Any) -> str:
    return html.escape(str(value))


def pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"


def img(data: str | None, alt: str) -> str:
    return f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}"></figure>' if data else ""


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=num' if i in numeric else ''}>{esc(c)}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def kv_table(data: Mapping[str, Any]) -> str:
    rows = [(k, json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in data.items()]
    return table(("key", "value"), rows)
