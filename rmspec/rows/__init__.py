"""The one reader of row files (JSON Lines, JSON, CSV, Parquet): format, encoding, guards, rows.

Every package that reads rows from a file goes through here (data sources, `rmspec score`, the
planner's estimate, `annotate export`, the benchmarks): a guard added after a fuzzer finding
then holds for all of them. Problems are a `RowError` (code, detail, file, line, col, field);
each caller maps it to its own outcome (a DataError and exit 2, a rejected row with a reason,
"cannot count").

One rule for formats, everywhere: by extension `.jsonl`/`.ndjson` (JSON Lines), `.json` (a JSON
array, a `{"data": [...]}` object, or JSON Lines if its first byte is `{`), `.csv`, `.parquet`/`.pq`.
`format: json` (declared) means the same as the `.json` extension. The first bytes of a file
that is another format (Parquet, gzip, zip, Arrow, SQLite) are an error that names what it is.

Standard library only: the planner (light side) imports it; pyarrow is imported inside the
Parquet branch only. By concern: `errors` (RowError and its codes, the format names), `formats`
(paths, extensions, magic bytes), `guards` (encoding, bare nulls, preflight), `reader` (rows).
Callers import from `rmspec.rows`.
"""

from rmspec.rows.errors import (
    BARE_NULL,
    EMPTY_LINE,
    ENCODING,
    FORMAT_BY_SUFFIX,
    FORMAT_NAMES,
    FORMATS,
    INVALID_JSON,
    LONE_SURROGATE,
    MAGIC,
    NO_MATCH,
    NOT_ARRAY,
    NOT_FOUND,
    NOT_OBJECT,
    UNKNOWN_FORMAT,
    UNREADABLE,
    WRONG_FORMAT,
    RowError,
)
from rmspec.rows.formats import (
    check_magic,
    count_lines,
    format_of,
    is_blank,
    is_json_lines,
    resolve_paths,
    sniff,
)
from rmspec.rows.guards import bare_null_line, first_undecodable, line_blocks, line_safe, preflight
from rmspec.rows.reader import Row, RowFile, decoded_lines, iter_rows, open_rows, parse_line, unwrap

__all__ = [
    "BARE_NULL",
    "EMPTY_LINE",
    "ENCODING",
    "FORMATS",
    "FORMAT_BY_SUFFIX",
    "FORMAT_NAMES",
    "INVALID_JSON",
    "LONE_SURROGATE",
    "MAGIC",
    "NOT_ARRAY",
    "NOT_FOUND",
    "NOT_OBJECT",
    "NO_MATCH",
    "UNKNOWN_FORMAT",
    "UNREADABLE",
    "WRONG_FORMAT",
    "Row",
    "RowError",
    "RowFile",
    "bare_null_line",
    "check_magic",
    "count_lines",
    "decoded_lines",
    "first_undecodable",
    "format_of",
    "is_blank",
    "is_json_lines",
    "iter_rows",
    "line_blocks",
    "line_safe",
    "open_rows",
    "parse_line",
    "preflight",
    "resolve_paths",
    "sniff",
    "unwrap",
]
