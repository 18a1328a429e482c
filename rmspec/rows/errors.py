"""What the row reader says is wrong: `RowError` and its codes, and the format names it knows.

Standard library only (the light side imports the reader).
"""

from __future__ import annotations

FORMATS = ("jsonl", "json", "csv", "parquet")
FORMAT_BY_SUFFIX = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
FORMAT_NAMES = {"json": "JSON", "jsonl": "JSON Lines", "parquet": "Parquet", "csv": "CSV"}
# The first bytes of formats a data folder holds, to say what a misnamed file really is.
MAGIC = {
    b"PAR1": "Parquet",
    b"\x1f\x8b": "gzip",
    b"PK\x03\x04": "zip",
    b"ARROW1": "Arrow",
    b"SQLite format 3": "SQLite",
}

# Codes of RowError. Document-level ones are raised by `open_rows`; row-level ones come with a Row.
NOT_FOUND, NO_MATCH, UNKNOWN_FORMAT, WRONG_FORMAT = "not_found", "no_match", "unknown_format", "wrong_format"
ENCODING, BARE_NULL, NOT_ARRAY, UNREADABLE = "encoding", "bare_null", "not_array", "unreadable"
INVALID_JSON, NOT_OBJECT, LONE_SURROGATE, EMPTY_LINE = "invalid_json", "not_object", "lone_surrogate", "empty_line"


class RowError(ValueError):
    """What is wrong, where: `code` (one of the constants above), `detail` (a sentence), `file`,
    `line` and `col` (1-based, when known), `field` (the spec field or row field at fault),
    `msg` (for invalid_json: the parser's short message, `col` its column)."""

    def __init__(
        self,
        code: str,
        detail: str,
        file: str = "",
        line: int | None = None,
        col: int | None = None,
        field: str | None = None,
        msg: str | None = None,
    ):
        self.code, self.detail, self.file, self.line, self.col, self.field = code, detail, str(file), line, col, field
        self.msg = msg if msg is not None else detail
        joint = " " if detail.startswith("is ") else ": "  # "data.jsonl is a gzip file, ..."
        super().__init__(f"{self.where}{joint}{detail}" if self.where else detail)

    @property
    def where(self) -> str:
        return ":".join(str(x) for x in (self.file, self.line, self.col) if x not in (None, ""))
