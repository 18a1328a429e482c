"""Hypothesis strategies for hostile input: mutated specs (documents and raw bytes) and data lines."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st
from ruamel.yaml import YAML

from harness import SHIPPED

# ---------------------------------------------------------------- spec documents

_safe = YAML(typ="safe", pure=True)
DOCS: dict[str, Any] = {p.name: _safe.load(p.read_text(encoding="utf-8")) for p in SHIPPED}
TEXTS: dict[str, bytes] = {p.name: p.read_bytes() for p in SHIPPED}

WORDS = [
    "auto",
    "cpu",
    "files",
    "pairs",
    "bradley_terry",
    "pointwise",
    "generative",
    "",
    "0",
    "-1",
    "1e400",
    "nan",
    ".inf",
    "~",
    "null",
    "yes",
    "no",
    "on",
    "h100-80gb",
    "custom",
    "max_length",
    "drop_empty",
    "huggingface",
    "sql",
    "../../etc/passwd",
    "/dev/zero",
    "*",
    "**/*.jsonl",
    "{name}",
    "runs/{nope}",
    "x" * 300,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(WORDS),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append(prefix + (key,))
            out.extend(_paths(value, prefix + (key,)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.append(prefix + (i,))
            out.extend(_paths(value, prefix + (i,)))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def _typo(word: str, draw) -> str:
    if not word:
        return "x"
    i = draw(st.integers(0, len(word) - 1))
    op = draw(st.sampled_from(["drop", "double", "swap", "case"]))
    if op == "drop":
        return word[:i] + word[i + 1 :] or "y"
    if op == "double":
        return word[:i] + word[i] + word[i:]
    if op == "swap" and i + 1 < len(word):
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word.upper()


def mutate(draw, doc: Any, rounds: tuple[int, int] = (1, 4)) -> Any:
    """1-4 structural mutations of a JSON-like document: values of other types, deleted and misspelt
    keys, unknown keys, values wrapped in lists, whole sections replaced."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(*rounds))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _parent(doc, path), path[-1]
        op = draw(st.sampled_from(["replace", "delete", "rename", "add_key", "wrap", "replace"]))
        if op == "replace":
            parent[key] = draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[_typo(str(key), draw)] = parent.pop(key)
        elif op == "add_key" and isinstance(parent[key], dict):
            parent[key][draw(st.text(min_size=1, max_size=12))] = draw(values)
        elif op == "wrap":
            parent[key] = [parent[key]]
    return doc


@st.composite
def mutated_documents(draw) -> tuple[str, Any]:
    """A shipped spec or template with 1-4 structural mutations."""
    name = draw(st.sampled_from(sorted(DOCS)))
    return name, mutate(draw, DOCS[name])


def dump(doc: Any, flow: bool) -> bytes:
    """A document as YAML text (block style) or JSON (which is YAML too)."""
    if flow:
        return json.dumps(doc, default=str).encode("utf-8")
    import io

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(doc, buffer)
    return buffer.getvalue().encode("utf-8")


# ---------------------------------------------------------------- spec bytes

YAML_TOKENS = [
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"!!python/object/apply:os.system [ls]",
    b"!!binary ",
    b"!!set ",
    b"!!omap ",
    b"!!timestamp ",
    b"!!int ",
    b"!!float ",
    b"!custom ",
    b"? ",
    b"---\n",
    b"...\n",
    b"%YAML 1.1\n",
    b"%TAG ! tag:x,2000:\n",
    b"|\n",
    b">-\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b"'",
    b"\t",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xe9",
    b"\x07",
    b"\r\n",
    b"\r",
    b"# ",
    b": ",
    b"- ",
    b"extends: ",
    b"extends: spec.yaml\n",
    b"*undefined",
    b"0x1F",
    b"0o17",
    b"1e400",
    b"9" * 5000,
    b"\\u0000",
    b"\xe2\x80\xa8",
    b"\xed\xa0\x80",
    b"\xf0\x9f\x98\x80",
    b"  " * 40,
    b"[" * 100,
    b"{a: " * 70,
]


@st.composite
def mutated_bytes(draw) -> bytes:
    """A shipped spec's bytes with 1-6 edits: YAML syntax tokens, random bytes, deleted ranges,
    duplicated or swapped lines, changed indentation."""
    data = bytearray(TEXTS[draw(st.sampled_from(sorted(TEXTS)))])
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["token", "bytes", "delete", "dup_line", "swap_lines", "indent"]))
        if op == "token":
            data[pos:pos] = draw(st.sampled_from(YAML_TOKENS))
        elif op == "bytes":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 40))]
        else:
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if op == "dup_line":
                lines.insert(i, lines[i])
            elif op == "swap_lines":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines[i] = b" " * draw(st.integers(0, 9)) + lines[i].lstrip(b" ")
            data = bytearray(b"\n".join(lines))
    return bytes(data)


@st.composite
def alias_bombs(draw) -> bytes:
    """Nested aliases, possibly with merge keys, wide or deep."""
    width = draw(st.integers(2, 12))
    depth = draw(st.integers(2, 12))
    merge = draw(st.booleans())
    text = 'a0: &a0 ["x"]\n' if not merge else "a0: &a0 {k: v}\n"
    for i in range(1, depth):
        if merge:
            refs = ", ".join(f"*a{i - 1}" for _ in range(width))
            text += f"a{i}: &a{i} {{<<: [{refs}], k{i}: [{refs}]}}\n"
        else:
            text += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]\n"
    return (
        (draw(st.sampled_from(list(TEXTS.values()))) + b"\n" + text.encode()) if draw(st.booleans()) else text.encode()
    )


set_expressions = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda k, v: f"{k}={v}",
        st.sampled_from(
            [
                "training.epochs",
                "training.learning_rate",
                "data.filters",
                "hardware.gpus_per_node",
                "a.b.c",
                "data.filters.0.kind",
                "data.filters.99",
                "model",
                "..",
                "x.0.1.2",
            ]
        ),
        st.one_of(st.text(max_size=20), st.sampled_from(["[", "{a: *b}", "&a [*a]", "!!binary x", "1e999", ""])),
    ),
)

# ---------------------------------------------------------------- data rows

huge_text = st.integers(2_000, 200_000).map(lambda n: ("word " * (n // 5 + 1))[:n])
field_values = st.one_of(
    st.text(max_size=40),
    st.text(min_size=1, max_size=40),
    st.none(),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.lists(st.text(max_size=10), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    huge_text,
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "system", "x"]), "content": st.text(max_size=20)}
        ),
        max_size=3,
    ),
)
good_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=60).filter(str.strip)


@st.composite
def data_rows(draw, preset: str) -> dict:
    if preset == "conversational":
        fields = ["chosen", "rejected"]
    elif preset == "helpsteer2":
        fields = ["prompt", "response", "helpfulness", "correctness"]
    else:
        fields = ["prompt", "chosen", "rejected"]
    if draw(st.integers(0, 3)) == 0:  # one in four rows is well-formed, so some rows pass
        row = {f: draw(good_text) for f in fields}
        if preset == "helpsteer2":
            row["helpfulness"], row["correctness"] = draw(st.integers(0, 4)), draw(st.integers(0, 4))
        if preset == "conversational":
            prompt = draw(good_text)
            row = {f: [{"role": "user", "content": prompt}, {"role": "assistant", "content": row[f]}] for f in fields}
        return row
    row = {}
    for f in fields:
        if draw(st.integers(0, 5)):  # a field is missing one time in six
            row[f] = draw(field_values)
    for _ in range(draw(st.integers(0, 2))):  # extra fields
        row[draw(st.text(min_size=1, max_size=8))] = draw(field_values)
    return row


@st.composite
def data_lines(draw, preset: str) -> bytes:
    """One physical line of a JSON Lines file, good or hostile."""
    kind = draw(st.integers(0, 9))
    if kind <= 5:
        return json.dumps(draw(data_rows(preset)), ensure_ascii=draw(st.booleans())).encode("utf-8")
    if kind == 6:  # a legacy encoding
        text = json.dumps(draw(data_rows(preset)), ensure_ascii=False)
        return text.encode(draw(st.sampled_from(["latin-1", "cp1252", "utf-16"])), errors="replace")
    if kind == 7:
        return draw(st.binary(max_size=60)).replace(b"\n", b" ")
    if kind == 8:
        return draw(
            st.sampled_from(
                [
                    b"[" * 5000,
                    b'{"a":' * 3000,
                    b"[1, 2]",
                    b'"text"',
                    b"null",
                    b"42",
                    b"{}",
                    b"   ",
                    b"\xef\xbb\xbf{}",
                    b"\x00" * 20,
                    b'{"prompt": "a\\ud800b"}',
                    b"{'prompt': 'x'}",
                    b'{"prompt": NaN}',
                    b'{"prompt": "x", "prompt": "y"}',
                    b"\x0c",
                    b"\x1e{}",
                ]
            )
        )
    row = json.dumps(draw(data_rows(preset))).encode()
    cut = draw(st.integers(0, len(row)))
    return row[:cut]  # a row cut off (a file written halfway)


@st.composite
def data_files(draw, preset: str) -> bytes:
    lines = draw(st.lists(data_lines(preset), min_size=0, max_size=10))
    end = draw(st.sampled_from([b"\n", b"\r\n"]))
    return end.join(lines) + (end if draw(st.booleans()) else b"")


# ---------------------------------------------------------------- Label Studio exports

SIDE = {
    "left": [{"from_name": "pw", "to_name": "pw", "type": "pairwise", "value": {"selected": "left"}}],
    "right": [{"from_name": "pw", "to_name": "pw", "type": "pairwise", "value": {"selected": "right"}}],
    "tie": [{"from_name": "tie", "to_name": "prompt", "type": "choices", "value": {"choices": ["tie"]}}],
}


def export_seed(n_tasks: int, swapped: list[bool], votes: list[dict[int, str]]) -> list[dict]:
    """A JSON export in the shape Label Studio 1.23.2 writes for `rmspec annotate export` tasks."""
    out = []
    for k in range(n_tasks):
        data = {
            "prompt": f"p{k}",
            "response_a": "x",
            "response_b": "y",
            "rmspec_id": f"s{k}",
            "rmspec_kind": "pairwise",
            "rmspec_swap": swapped[k],
        }
        anns = [
            {"id": 100 * k + a, "completed_by": a, "was_cancelled": False, "result": copy.deepcopy(SIDE[side])}
            for a, side in votes[k].items()
        ]
        out.append(
            {
                "id": k + 1,
                "data": data,
                "meta": {"rmspec_id": f"s{k}", "rmspec_kind": "pairwise", "rmspec_swap": swapped[k]},
                "annotations": anns,
            }
        )
    return out


def json_min_seed(n_tasks: int, swapped: list[bool], votes: list[dict[int, str]]) -> list[dict]:
    rows = []
    for k in range(n_tasks):
        base = {
            "id": k + 1,
            "prompt": f"p{k}",
            "response_a": "x",
            "response_b": "y",
            "rmspec_id": f"s{k}",
            "rmspec_kind": "pairwise",
            "rmspec_swap": swapped[k],
        }
        for a, side in votes[k].items() or {None: None}.items():
            row = {**base, "annotator": a, "annotation_id": None if a is None else 100 * k + a}
            if side in ("left", "right"):
                row["pw"] = {"selected": side}
            elif side == "tie":
                row["tie"] = "tie"
            rows.append(row)
    return rows


@st.composite
def mutated_exports(draw) -> Any:
    n = draw(st.integers(1, 4))
    swapped = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    votes = draw(
        st.lists(
            st.dictionaries(st.integers(1, 3), st.sampled_from(["left", "right", "tie"]), max_size=3),
            min_size=n,
            max_size=n,
        )
    )
    seed = (export_seed if draw(st.booleans()) else json_min_seed)(n, swapped, votes)
    return mutate(draw, seed, (0, 5))


# ---------------------------------------------------------------- HTTP request bodies

HTTP_SEEDS = {
    "/get_reward": {
        "query": ["Question? Answer.", "Another question? Another answer."],
        "prompts": ["Question?"],
        "labels": [None],
    },
    "/classify": {"model": "m", "input": ["Question? Answer.", "Short."]},
    "/v1/classify": {"model": "m", "input": "Question? Answer."},
    "/pooling": {"model": "m", "input": [[101, 2054, 102], [101, 102]], "truncate_prompt_tokens": 8},
    "/v1/chat/completions": {
        "model": "m",
        "messages": [{"role": "user", "content": "Which is better?"}],
        "max_tokens": 4,
    },
}


@st.composite
def http_requests(draw) -> tuple[str, bytes, str]:
    """(route, body, content type): a mutated protocol body, or raw bytes."""
    route = draw(st.sampled_from(sorted(HTTP_SEEDS)))
    kind = draw(st.integers(0, 9))
    if kind <= 6:
        body = json.dumps(mutate(draw, HTTP_SEEDS[route], (0, 4)), default=str).encode()
    elif kind == 7:
        body = draw(st.binary(max_size=80))
    elif kind == 8:
        body = draw(
            st.sampled_from(
                [
                    b"",
                    b"null",
                    b"[]",
                    b"{}",
                    b'{"query": ' + b"[" * 5000,
                    b'{"input": [' + b"1," * 3000 + b"1]}",
                    rb'{"query": ["\ud800"]}',
                    b'{"input": [[-1, 99999999]]}',
                    b'{"input": [[]]}',
                    b'{"query": "' + b"word " * 20000 + b'"}',
                    b"\xef\xbb\xbf{}",
                ]
            )
        )
    else:
        body = json.dumps(HTTP_SEEDS[route]).encode()[: draw(st.integers(0, 40))]  # cut off
    content_type = draw(st.sampled_from(["application/json", "application/json", "text/plain", ""]))
    return route, body, content_type
