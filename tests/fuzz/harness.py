"""The checks every fuzzed input must pass, whatever it is.

A spec (bytes) either loads, or raises an RmspecError whose issues are located in the file; it is
never an exception of another type, never a traceback in what the user sees, and it is answered
within CASE_SECONDS and CASE_MEGABYTES. A data file either reads, with counts that reconcile and
each dropped row in the rejects file with a known reason and its file:line, or raises a DataError
that names the file.

A case that breaks a rule is written to tests/fuzz/corpus/ when RMSPEC_FUZZ_SAVE=1, so that it is
replayed as a regular test from then on (test_fuzz_corpus.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import resource
import time
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI replays a fixed set of examples (derandomized: a red CI run is reproducible, and no example
# database is written); a developer's run explores new ones each time. The per-case wall-time and
# memory bounds are below (hypothesis' own deadline is off: 2 shared cores make it flaky). There is
# no conftest.py here on purpose: without __init__.py files, a second module named conftest would
# clash with tests/conftest.py.
_common = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
settings.register_profile("rmspec-ci", derandomize=True, database=None, print_blob=True, **_common)
settings.register_profile("rmspec-dev", print_blob=True, **_common)
settings.load_profile(
    os.environ.get("RMSPEC_FUZZ_PROFILE") or ("rmspec-ci" if os.environ.get("CI") == "true" else "rmspec-dev")
)


@pytest.fixture(scope="module", autouse=True)
def private_datasets_cache(tmp_path_factory):
    """Fuzzed files must not fill the user's ~/.cache/huggingface/datasets (import this fixture)."""
    import datasets.config

    old = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = tmp_path_factory.mktemp("hf-datasets")
    yield
    datasets.config.HF_DATASETS_CACHE = old


CORPUS = Path(__file__).resolve().parent / "corpus"
REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "specs").glob("*.yaml")) + sorted((REPO / "templates").glob("*.yaml"))

# Per case. The shipped specs take 0.05-0.3 s to validate and plan here; a bound far above that
# tells a hang from a slow machine (2 shared cores, often loaded several-fold).
CASE_SECONDS = 15.0
CASE_MEGABYTES = 300

# A reject reason is a short snake_case word a user can count and grep (encoding, invalid_json, wrong_type...).
REASON = re.compile(r"^[a-z][a-z_]*$")


def scaled(examples: int) -> int:
    """Examples per test; RMSPEC_FUZZ_SCALE=10 explores ten times as many (a long local run)."""
    return max(1, int(examples * float(os.environ.get("RMSPEC_FUZZ_SCALE", "1"))))


class Finding(AssertionError):
    """A rule broken by a fuzzed input."""


@contextmanager
def bounded(what: str):
    """Fail the case if it takes longer than CASE_SECONDS or grows peak memory by CASE_MEGABYTES."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    yield
    seconds = time.perf_counter() - t0
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    if seconds > CASE_SECONDS:
        raise Finding(f"{what}: took {seconds:.1f} s (bound {CASE_SECONDS} s)")
    if grown > CASE_MEGABYTES:
        raise Finding(f"{what}: peak memory grew by {grown:.0f} MB (bound {CASE_MEGABYTES} MB)")


def save_case(kind: str, data: bytes, suffix: str, note: str = "") -> Path | None:
    """Keep a failing input in the corpus (only when asked: RMSPEC_FUZZ_SAVE=1)."""
    if os.environ.get("RMSPEC_FUZZ_SAVE") != "1":
        return None
    folder = CORPUS / kind
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
    path.write_bytes(data)
    if note:
        path.with_suffix(path.suffix + ".txt").write_text(note + "\n")
    return path


# ---------------------------------------------------------------- specs


def check_spec(data: bytes, folder: Path, sets: tuple[str, ...] = (), *, plan: bool = True) -> str:
    """Load (and plan) a spec; 'valid', 'refused' (a located RmspecError) or a Finding."""
    from rich.console import Console

    from rmspec.errors import RmspecError, SpecError
    from rmspec.render.errors import print_error

    spec = folder / "spec.yaml"
    spec.write_bytes(data)
    try:
        with bounded("validate"):
            outcome = _load_and_plan(spec, sets, plan)
    except SpecError as exc:
        _check_issues(exc, spec, data)
        _render(print_error, exc, Console)
        return "refused"
    except RmspecError as exc:
        if not exc.message:
            raise Finding(f"{type(exc).__name__} without a message") from exc
        _render(print_error, exc, Console)
        return "refused"
    except Finding:
        save_case("specs", data, ".yaml", "sets: " + json.dumps(list(sets)) if sets else "")
        raise
    except BaseException as exc:  # anything else reaches the user as a traceback (or, now, "internal error")
        save_case("specs", data, ".yaml", "sets: " + json.dumps(list(sets)) if sets else "")
        raise Finding(f"{type(exc).__name__} escaped from loading a spec: {exc}") from exc
    return outcome


def _load_and_plan(spec: Path, sets: tuple[str, ...], plan: bool) -> str:
    from rmspec.spec import load_spec

    loaded = load_spec(spec, sets)
    if plan:
        from rmspec.plan import compile_plan

        compile_plan(loaded, sets=sets).to_json()
    return "valid"


def _check_issues(exc, spec: Path, data: bytes) -> None:
    if not exc.issues:
        raise Finding("a SpecError with no issue")
    n_lines = data.count(b"\n") + 1
    for issue in exc.issues:
        if not issue.message or not isinstance(issue.message, str):
            raise Finding(f"an issue without a message: {issue}")
        if issue.file is None:
            raise Finding(f"an issue not located in any file: {issue.render_plain()}")
        if (
            issue.file == str(spec)
            and issue.line is not None
            and (not (1 <= issue.line <= n_lines + 1) or (issue.col is not None and issue.col < 1))
        ):
            raise Finding(f"an issue located outside the file ({n_lines} lines): {issue.render_plain()}")


def _render(print_error, exc, console_cls) -> None:
    buffer = io.StringIO()
    print_error(exc, console_cls(file=buffer, width=120, no_color=True))
    if "Traceback" in buffer.getvalue():
        raise Finding("a traceback in the rendered error")


def check_cli(args: list[str]) -> tuple[int, str]:
    """Run `rmspec ARGS` in-process; exit 0 or 2 and no traceback, else a Finding."""
    import sys

    from rmspec.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["rmspec", *args]
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err), bounded(" ".join(args[:1])):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = argv
    text = out.getvalue() + err.getvalue()
    if "Traceback" in text or "internal error" in text or code not in (0, 2):
        raise Finding(f"rmspec {' '.join(args)}: exit {code}\n{text[-3000:]}")
    return code, text


# ---------------------------------------------------------------- data files


SPEC_FOR_DATA = {
    "pairs": ({"preset": "pairs"}, {"kind": "bradley_terry"}),
    "conversational": ({"preset": "conversational"}, {"kind": "bradley_terry"}),
    "helpsteer2": ({"preset": "helpsteer2"}, {"kind": "pointwise", "attributes": ["helpfulness", "correctness"]}),
}


def data_lines(data: bytes) -> int:
    """Rows a JSON Lines file holds: its lines with anything but whitespace (a UTF-8 byte-order
    mark at the start is not content)."""
    return sum(1 for line in data.removeprefix(b"\xef\xbb\xbf").split(b"\n") if line.strip())


def check_data(data: bytes, folder: Path, preset: str = "pairs", *, tokenizer=None, name: str = "rows.jsonl") -> str:
    """Read a data file through the pipeline; 'read', 'refused' (a DataError naming the file) or a Finding."""
    from helpers.data import make_spec
    from rmspec.data import load_canonical, prepare
    from rmspec.errors import DataError

    path = folder / name
    path.write_bytes(data)
    mapping, approach = SPEC_FOR_DATA[preset]
    rejects = folder / "rejects.jsonl"
    try:
        with bounded(f"data {preset}"):
            loaded = make_spec(
                folder,
                {"source": {"kind": "files", "paths": [name]}, "mapping": mapping},
                approach=approach,
                max_length=64,
            )
            if tokenizer is None:
                _, report = load_canonical(loaded, rejects_path=rejects)
            else:
                report = prepare(loaded, tokenizer, rejects_path=rejects, cache_dir=folder / "cache").report
    except DataError as exc:
        # Located: it names the file, or the spec field it is about (data.mapping: the file has none
        # of the mapped columns), or it is the end of a preparation whose every row was rejected.
        located = name in exc.message or exc.message.startswith("data.") or "no training rows left" in exc.message
        if not located or not exc.hint:
            save_case("data", data, f".{preset}.jsonl")
            raise Finding(f"a DataError without its file or field, or without a hint: {exc.message}") from exc
        return "refused"
    except BaseException as exc:
        save_case("data", data, f".{preset}.jsonl")
        raise Finding(f"{type(exc).__name__} escaped from reading a data file: {exc}") from exc
    try:
        _check_report(report, rejects, data, path)
    except Finding:
        save_case("data", data, f".{preset}.jsonl")
        raise
    return "read"


def _check_report(report, rejects: Path, data: bytes, path: Path) -> None:
    counts = report.to_json()
    if not report.reconciled:
        raise Finding(f"counts do not reconcile: {counts['sources']}")
    source = report.sources["train"]
    if source.rows_read != data_lines(data):
        raise Finding(f"rows_read {source.rows_read} but the file has {data_lines(data)} non-blank lines")
    # JSON Lines splits on "\n" only (str.splitlines would also cut at U+0085, U+2028 inside strings).
    lines = [json.loads(line) for line in rejects.read_text(encoding="utf-8").split("\n") if line]
    if len(lines) != source.rows_rejected:
        raise Finding(f"{len(lines)} lines in the rejects file, {source.rows_rejected} rows counted as rejected")
    for line in lines:
        if not REASON.match(line["reason"] or "") or not line["detail"]:
            raise Finding(f"a reject without a reason word and a detail: {line}")
        if line["reason"] in ("encoding", "invalid_json") and not line["detail"].startswith(f"{path}:"):
            raise Finding(f"a {line['reason']} reject without its file:line: {line['detail']!r}")
