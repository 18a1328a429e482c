"""Fuzzed inputs of `rmspec annotate import` (Label Studio exports) and `rmspec serve` (HTTP request
bodies on every protocol route). An export is read, each bad annotation carrying its reason, or
refused with a DataError that names the file; a request gets a 2xx or a 4xx whose JSON body says
what is wrong, never a 5xx or a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import CORPUS, Finding, bounded, check_cli, save_case, scaled
from strategies import http_requests, mutated_exports

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------- Label Studio exports


def check_export(value, folder: Path) -> str:
    from rmspec.annotate.aggregate import aggregate
    from rmspec.annotate.exports import load_export
    from rmspec.errors import DataError

    data = value if isinstance(value, bytes) else json.dumps(value, default=str).encode()
    path = folder / "export.json"
    path.write_bytes(data)
    try:
        with bounded("annotate import"):
            tasks = load_export(path)
            for policy, ties in (("majority", "keep"), ("majority", "drop")):
                aggregate(tasks, policy, ties)
    except DataError as exc:
        if str(path) not in exc.message or not exc.hint:
            save_case("exports", data, ".json")
            raise Finding(f"a DataError without the export's path or a hint: {exc.message}") from exc
        return "refused"
    except Finding:
        save_case("exports", data, ".json")
        raise
    except BaseException as exc:
        if _known(exc):
            return "known bug"
        save_case("exports", data, ".json")
        raise Finding(f"{type(exc).__name__} escaped from reading an export: {exc}") from exc
    for task in tasks:  # an unusable task or annotation says why
        if task.error is not None and not task.error.strip():
            raise Finding(f"a task marked unusable without a reason: {task}")
        for ann in task.annotations:
            if ann.error is not None and not ann.error.strip():
                raise Finding(f"an annotation marked unusable without a reason: {ann}")
    return "read"


# Found by this harness in rmspec/annotate (not this code; reported to its owner), kept
# visible by the strict xfail of test_known_export_bugs below: a value of an unexpected JSON type
# (a list where an id, meta or rmspec_swap belongs) raises TypeError/AttributeError in
# annotate/exports.py instead of a DataError or an annotation/task error with its reason, and an
# export of 50,000 nested brackets a RecursionError from json.loads in load_export. Empty this
# once the corpus cases *.known.json pass.
KNOWN_ANNOTATE_BUGS = {"TypeError", "AttributeError", "RecursionError"}  # RecursionError: json.loads of deep nesting


def _known(exc: BaseException) -> bool:
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return type(exc).__name__ in KNOWN_ANNOTATE_BUGS and any(f.filename.endswith("annotate/exports.py") for f in frames)


KNOWN_CASES = sorted((CORPUS / "exports").glob("*.known.json"))


@pytest.mark.xfail(strict=True, reason="known rmspec/annotate/exports.py bugs found by the fuzzer (owner: annotate)")
@pytest.mark.parametrize("case", KNOWN_CASES, ids=lambda p: p.name)
def test_known_export_bugs(case):
    from rmspec.annotate.aggregate import aggregate
    from rmspec.annotate.exports import load_export
    from rmspec.errors import DataError

    try:
        aggregate(load_export(case), "majority", "keep")
    except DataError:
        pass  # a located refusal is the fix; this test then passes (XPASS) and the mark must go


@settings(max_examples=scaled(80))
@given(mutated_exports())
def test_mutated_exports(value):
    with tempfile.TemporaryDirectory(prefix="rmspec-fuzz-") as tmp:
        check_export(value, Path(tmp))


@settings(max_examples=scaled(20))
@given(st.one_of(st.binary(max_size=200), mutated_exports().map(lambda v: json.dumps(v).encode()[:-3]),
                 st.just(b"\xef\xbb\xbf[]"), st.just(b"[" * 50_000), st.just("[{\"data\": \"caf\u00e9\"}]".encode("latin-1"))))
def test_export_bytes(data):
    with tempfile.TemporaryDirectory(prefix="rmspec-fuzz-") as tmp:
        check_export(data, Path(tmp))


@settings(max_examples=scaled(6))
@given(mutated_exports())
def test_annotate_import_command(value):
    with tempfile.TemporaryDirectory(prefix="rmspec-fuzz-") as tmp:
        export = Path(tmp) / "export.json"
        export.write_text(json.dumps(value, default=str))
        try:
            check_cli(["annotate", "import", str(export), "--out", str(Path(tmp) / "pairs.jsonl")])
        except Finding as finding:
            # The last-resort handler wrote the traceback to a file: a known exports.py bug is no new finding.
            marker = "internal error, please report: "
            report = str(finding).split(marker, 1)[1].split()[0] if marker in str(finding) else None
            trace = Path(report).read_text() if report and Path(report).is_file() else ""
            last = trace.strip().splitlines()[-1] if trace.strip() else ""
            if not ("annotate/exports.py" in trace and last.split(":")[0] in KNOWN_ANNOTATE_BUGS):
                raise
            Path(report).unlink()  # a known bug's report: do not leave one per example in the temp folder


# ---------------------------------------------------------------- HTTP request bodies


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from rmspec.inference.engine import RewardEngine
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Limits, Service
    from test_eval_scoring import build_tiny_bert

    model = build_tiny_bert(tmp_path_factory.mktemp("fuzz_bert"))
    limits = Limits(max_body_bytes=64 * 1024, max_items=64)
    app = create_app(Service(RewardEngine.load(model), model_name="fuzz", limits=limits))
    with TestClient(app, raise_server_exceptions=False) as c:  # the lifespan starts the batcher
        yield c


# Found by this harness in rmspec/serve and fixed there (a 422 naming the body or the item, was
# 500): a body of thousands of nested brackets (RecursionError in the JSON parser) and an empty
# text to score (RuntimeError in the model on zero tokens). Replayed as regressions.
FIXED_HTTP = sorted((CORPUS / "http").glob("*.json"))


@pytest.mark.parametrize("case", FIXED_HTTP, ids=lambda p: p.name)
def test_fixed_http_bugs(client, case):
    request_ = json.loads(case.read_text())
    response = client.post(request_["route"], content=request_["body"].encode("latin-1"),
                           headers={"Content-Type": request_["content_type"]})
    assert response.status_code == 422 and response.json()["error"]["message"], response.text


@settings(max_examples=scaled(80))
@given(http_requests())
def test_http_bodies(client, request_):
    route, body, content_type = request_
    headers = {"Content-Type": content_type} if content_type else {}
    with bounded(f"POST {route}"):
        response = client.post(route, content=body, headers=headers)
    text = response.text
    if response.status_code >= 500 or "Traceback" in text:
        save_case("http", json.dumps({"route": route, "content_type": content_type,
                                      "body": body.decode("latin-1")}).encode(), ".json")
        raise Finding(f"POST {route} {body[:200]!r}: {response.status_code} {text[:500]}")
    payload = response.json()
    if response.status_code >= 400:
        message = (payload.get("error") or {}).get("message") if isinstance(payload, dict) else None
        if not message:
            raise Finding(f"POST {route}: {response.status_code} without error.message: {text[:300]}")
