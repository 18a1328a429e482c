"""Read spec files with ruamel.yaml, keeping where every node came from.

A loaded document becomes plain Python data (dicts, lists, scalars) plus a
``Locations`` index from field paths to (file, line, col). Errors found later by
pydantic or by the cross-field rules are located through that index, also when a
value came from an ``extends:`` base file or from a ``--set`` override.

A spec is a hand-written config, so hostile input is refused before it costs time or memory:
a file over ``MAX_SPEC_BYTES``, bytes that are not UTF-8, nesting deeper than ``MAX_DEPTH`` and
more than ``MAX_NODES`` nodes once aliases are expanded ("billion laughs": ruamel composes an
alias as a shared node, and walking the document expands it). Each is a located SpecError that
states the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.scanner import RoundTripScanner

from rmspec.errors import SpecError, SpecIssue

Path_ = tuple  # a field path: tuple of str keys and int indexes


@dataclass(frozen=True)
class Loc:
    file: str
    line: int | None = None  # 1-based
    col: int | None = None  # 1-based


@dataclass
class Locations:
    """Field path -> where it was written. Keys point at the key, values at the value."""

    keys: dict[tuple, Loc] = field(default_factory=dict)
    values: dict[tuple, Loc] = field(default_factory=dict)
    default_file: str = "<spec>"

    def find(self, path: tuple, *, prefer_key: bool = False) -> Loc:
        """The location of ``path``, or of its nearest written ancestor."""
        probe = tuple(path)
        while True:
            first, second = (self.keys, self.values) if prefer_key else (self.values, self.keys)
            if probe in first:
                return first[probe]
            if probe in second:
                return second[probe]
            if not probe:
                return (
                    Loc(self.default_file, 1, 1)
                    if not self.default_file.startswith("--set")
                    else Loc(self.default_file)
                )
            probe = probe[:-1]

    def merge(self, other: Locations) -> None:
        """Positions of ``other`` win (it overrides this document)."""
        self.keys.update(other.keys)
        self.values.update(other.values)

    def drop_under(self, path: tuple) -> None:
        """Forget everything below ``path`` (a list replaced whole by an override)."""
        n = len(path)
        for table in (self.keys, self.values):
            for p in [p for p in table if len(p) > n and p[:n] == path]:
                del table[p]


# The shipped specs are 1-2 KiB, 4 levels deep and 60-120 nodes. ruamel's round-trip parser
# takes 0.1-0.35 ms per node on 2 shared cores (measured: 20,000 keys in 14 s under load), so the
# node bound, counted as the parser goes, is what keeps any input answered in about a second; it
# counts an alias as the whole subtree it names, which stops an alias bomb before it is expanded.
MAX_SPEC_BYTES = 256 * 1024
MAX_DEPTH = 64
MAX_NODES = 10_000


class _Refused(Exception):
    """Raised inside the composer; parse_yaml_text turns it into a located SpecIssue."""

    def __init__(self, message: str, mark: Any, hint: str):
        super().__init__(message)
        self.message, self.mark, self.hint = message, mark, hint


class _BoundedComposer(Composer):
    """Counts nodes as the parser yields them, an alias counting as the whole subtree it names.

    The count and the depth are those of the document as later code walks it (aliases expanded),
    so the refusal comes while composing: before the expansion costs anything."""

    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader=loader)
        self._expanded = 0
        self._heights: list[int] = []  # per open node: the height of its tallest child so far
        self._sizes: dict[int, tuple[int, int]] = {}  # id(anchored node) -> (expanded nodes, height)
        self._open: set[str] = set()  # anchors whose node is being composed
        self.warn_double_anchors = False  # redefining an anchor is valid YAML; no warning on the user's terminal

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):
            if event.anchor in self._open:  # `&a [*a]`: a cycle, infinite once expanded
                raise _Refused(
                    f"the alias *{event.anchor} is inside its own anchor &{event.anchor}: "
                    f"the value would contain itself without end",
                    event.start_mark,
                    "an alias may only name a value that is complete before it",
                )
            node = super().compose_node(parent, index)  # undefined aliases raise there, located
            size, height = self._sizes.get(id(node), (1, 1))
            target = node.start_mark
            alias = f"the alias *{event.anchor} (anchor &{event.anchor} on line {target.line + 1})"
            if self._expanded + size > MAX_NODES:
                raise _Refused(
                    f"{alias} expands to {size:,} nodes: a spec may hold at most {MAX_NODES:,} nodes once its "
                    f"aliases are expanded",
                    event.start_mark,
                    "a spec needs no more than a few hundred values: remove the nested aliases",
                )
            if len(self._heights) + height > MAX_DEPTH:
                raise _Refused(
                    f"nesting deeper than {MAX_DEPTH} levels, the limit for a spec: {alias} is {height} levels "
                    f"deep and used at depth {len(self._heights)}",
                    event.start_mark,
                    "flatten the structure; a spec needs only a few levels",
                )
            self._expanded += size
            self._child(height)
            return node
        self._expanded += 1
        if self._expanded > MAX_NODES:
            raise _Refused(
                f"more than {MAX_NODES:,} nodes, the limit for a spec",
                event.start_mark,
                "a spec needs no more than a few hundred values",
            )
        if len(self._heights) >= MAX_DEPTH:
            raise _Refused(
                f"nesting deeper than {MAX_DEPTH} levels, the limit for a spec",
                event.start_mark,
                "flatten the structure; a spec needs only a few levels",
            )
        start = self._expanded
        self._heights.append(0)
        if event.anchor is not None:
            self._open.add(event.anchor)
        node = super().compose_node(parent, index)
        self._open.discard(event.anchor)
        height = 1 + self._heights.pop()
        self._child(height)
        if event.anchor is not None:
            self._sizes[id(node)] = (self._expanded - start + 1, height)
        return node

    def _child(self, height: int) -> None:
        if self._heights and height > self._heights[-1]:
            self._heights[-1] = height


class _BoundedScanner(RoundTripScanner):
    """Refuses deep flow nesting (`[[[[...`) as it scans: each open bracket keeps a pending simple
    key that every later token walks, so 5,000 brackets cost seconds before the composer sees one."""

    def fetch_flow_collection_start(self, TokenClass: Any, to_push: Any) -> None:
        if len(self.flow_context) >= MAX_DEPTH:
            raise _Refused(
                f"nesting deeper than {MAX_DEPTH} levels, the limit for a spec",
                self.reader.get_mark(),
                "flatten the structure; a spec needs only a few levels",
            )
        super().fetch_flow_collection_start(TokenClass, to_push)


def _yaml() -> YAML:
    # Round-trip mode keeps line/column marks; it builds only maps, lists and
    # scalars (no arbitrary Python objects), so it is as safe as typ="safe".
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    yaml.Scanner = _BoundedScanner
    yaml.Composer = _BoundedComposer
    return yaml


def _line_col(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of a character index."""
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _to_plain(node: Any, path: tuple, file: str, locs: Locations) -> Any:
    if isinstance(node, CommentedMap):
        out = {}
        for key, value in node.items():
            child = path + (str(key),)
            # Keys merged in by `<<: *anchor` have no position of their own in this map: their
            # problems are located at the map (the nearest written ancestor).
            pos = node.lc.data.get(key)
            kl = (pos[0], pos[1]) if pos else None
            vl = (pos[2], pos[3]) if pos else None
            if kl is not None:
                locs.keys[child] = Loc(file, kl[0] + 1, kl[1] + 1)
            if isinstance(value, (CommentedMap, CommentedSeq)) and kl is not None:
                # A section's problems point at its key, not at its first child.
                locs.values[child] = Loc(file, kl[0] + 1, kl[1] + 1)
            elif vl is not None:
                locs.values[child] = Loc(file, vl[0] + 1, vl[1] + 1)
            out[str(key)] = _to_plain(value, child, file, locs)
        return out
    if isinstance(node, CommentedSeq):
        out_list = []
        for i, value in enumerate(node):
            child = path + (i,)
            il = node.lc.item(i)
            if il is not None:
                locs.values[child] = Loc(file, il[0] + 1, il[1] + 1)
            out_list.append(_to_plain(value, child, file, locs))
        return out_list
    if isinstance(node, str):
        return str(node)  # drop ruamel's scalar string subclasses
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def parse_yaml_text(text: str, file: str) -> tuple[Any, Locations]:
    """Parse YAML text; a syntax error becomes a located SpecError."""
    locs = Locations(default_file=file)
    try:
        doc = _yaml().load(text)
    except _Refused as exc:
        mark = exc.mark
        raise SpecError(
            [
                SpecIssue(
                    path="",
                    message=exc.message,
                    file=file,
                    line=mark.line + 1 if mark else None,
                    col=mark.column + 1 if mark else None,
                    hint=exc.hint,
                )
            ]
        ) from None
    except ReaderError as exc:  # a character YAML does not allow (control characters, NUL)
        line, col = _line_col(text, exc.position) if isinstance(exc.position, int) else (None, None)
        what = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        raise SpecError(
            [
                SpecIssue(
                    path="",
                    message=f"character {what} is not allowed in YAML ({exc.reason})",
                    file=file,
                    line=line,
                    col=col,
                    hint="remove it; is this a binary file, or text pasted from a terminal?",
                )
            ]
        ) from None
    except RecursionError:  # a bound above should stop this first; never let it out as a traceback
        raise SpecError(
            [SpecIssue(path="", message=f"nesting too deep: a spec may nest at most {MAX_DEPTH} levels", file=file)]
        ) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        what = exc.problem or "invalid YAML"
        if exc.context:
            what = f"{exc.context}, {what}"
        raise SpecError(
            [
                SpecIssue(
                    path="",
                    message=f"YAML syntax error: {what}",
                    file=file,
                    line=line,
                    col=col,
                    hint="check indentation, colons and quoting around this line",
                )
            ]
        ) from None
    except Exception as exc:  # ruamel raises a few unmarked errors (e.g. duplicate keys)
        raise SpecError([SpecIssue(path="", message=f"YAML error: {exc}", file=file)]) from None
    return _to_plain(doc, (), file, locs), locs


def read_yaml_file(path: Path) -> tuple[Any, Locations]:
    file = str(path)
    try:
        if path.exists() and not path.is_dir() and not path.is_file():  # a FIFO or device would block or never end
            raise SpecError(
                [
                    SpecIssue(
                        path="",
                        message="not a regular file",
                        file=file,
                        hint="a spec (and an extends: base) must be a YAML file",
                    )
                ]
            )
        with open(path, "rb") as fh:
            data = fh.read(MAX_SPEC_BYTES + 1)  # never more: a huge file is refused without reading it
    except FileNotFoundError:
        raise SpecError([SpecIssue(path="", message="file not found", file=file, hint="check the path")]) from None
    except IsADirectoryError:
        raise SpecError([SpecIssue(path="", message="is a directory, not a spec file", file=file)]) from None
    except OSError as exc:
        raise SpecError([SpecIssue(path="", message=f"cannot read: {exc.strerror}", file=file)]) from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(
            [
                SpecIssue(
                    path="",
                    message=f"the file is larger than {MAX_SPEC_BYTES // 1024} KiB, the limit for a spec",
                    file=file,
                    line=None,
                    hint="a spec is a short hand-written file (the shipped ones are 1-2 KiB); keep data "
                    "in data files and point data.source at them",
                )
            ]
        ) from None
    return parse_yaml_text(decode_utf8(data, file), file)


def decode_utf8(data: bytes, file: str) -> str:
    """UTF-8 text (a BOM is dropped); otherwise a SpecError at the first bad byte's line and column."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise SpecError(
                [
                    SpecIssue(
                        path="",
                        message="the file is UTF-16 (it starts with a UTF-16 byte-order mark); a spec must be UTF-8",
                        file=file,
                        line=1,
                        col=1,
                        hint=f"convert it: iconv -f UTF-16 -t UTF-8 {file} > fixed.yaml",
                    )
                ]
            ) from None
        head = data[: exc.start]
        line = head.count(b"\n") + 1
        col = len(head[head.rfind(b"\n") + 1 :].decode("utf-8", errors="replace")) + 1
        byte = data[exc.start]
        raise SpecError(
            [
                SpecIssue(
                    path="",
                    message=f"the file is not UTF-8: byte 0x{byte:02x} cannot be decoded ({exc.reason})",
                    file=file,
                    line=line,
                    col=col,
                    hint=f"save the file as UTF-8 (from Latin-1: iconv -f LATIN1 -t UTF-8 {file})",
                )
            ]
        ) from None
