"""`rmspec export RUN --to vllm -o DIR --check`: the real vLLM engine on the exported folder against
`rmspec score`, row by row.

The engine runs from an environment the user names (`--vllm-python`, else $RMSPEC_VLLM_PYTHON, else
the venv .ci/install_vllm.sh makes: $RMSPEC_VLLM_VENV or /opt/rmspec-vllm), on 127.0.0.1 at a free
port, started with the folder's own serve command in the checked precision (rmspec.export.check_dtype:
float32 on a CPU engine, bfloat16 on a GPU one, or --dtype). The rows are the run's held-out split
(rmspec.export.check_rows; --check-rows FILE, or built-in conversations for a bare model folder). Each
row is sent in every client form the README promises (chat `messages`; verl's text: template, BOS
stripped, default special tokens; the rendered text with `add_special_tokens: false`), to `/classify`
and to `/pooling`, and `rmspec score` (a subprocess: the command users run, float32) scores the same
rows. The largest difference is printed and written to RUN/export_vllm_check.json (or next to the
folder for a bare model), with the rows used, the dtype, the tolerance and its rule; above the
tolerance the command exits 1. The naive form (rendered text with its BOS and vLLM's default special
tokens) is measured too and reported, never counted: it is the documented trap. Rows longer than the
run's max_length are left out (vLLM refuses them; rmspec cuts the prompt) and counted.

A missing or broken vLLM environment, or a server that does not come up, is an RmspecError (exit 2)
with the end of the server's log; the server's process group is always stopped.

A vision-language reward model's rows carry their pictures (rmspec.export.check_image_rows): vLLM gets each as
`messages` with OpenAI `image_url` parts on `/classify` and `/pooling`, `rmspec score` the same conversation with
image parts and an `images` column.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.export.check_dtype import Tolerance, choose, cpu_flags, engine_device, tolerance
from rmspec.export.check_rows import CheckRow, CheckRows
from rmspec.export.vllm import serve_command
from rmspec.export.vllm_bos import verl_text
from rmspec.export.vllm_hosting import Hosting
from rmspec.inference.engine_vllm import (  # noqa: F401 (DEFAULT_VENV, tail: kept for callers)
    DEFAULT_VENV,
    START_TIMEOUT_S,
    VllmProcess,
    broken_environment,
    free_port,
    post,
    tail,
    vllm_python,
)

CHECK_FILE = "export_vllm_check.json"
# The vLLM process (its environment, the watchdog that stops it with rmspec, its log) has one home, shared
# with `rmspec serve --engine vllm`: rmspec.inference.engine_vllm. Its names are kept here for callers.


@contextmanager
def running_server(command: list[str], log: Path, timeout: float = START_TIMEOUT_S) -> Iterator[str]:
    """vLLM's server from `command` until the block ends: its base URL; its process group is stopped after
    (and by its watchdog if this process dies first)."""
    server = VllmProcess(command, log)
    try:
        server.wait_ready(timeout)
        yield server.url
    finally:
        server.stop()


def fitting(rows: list[CheckRow], tokenizer: Any, max_length: int) -> tuple[list[CheckRow], int]:
    """The rows whose rendered conversation fits the run's max_length (vLLM answers HTTP 400 to a
    longer one; rmspec cuts its prompt), and how many were left out."""
    kept = []
    for row in rows:
        chat = [*row.messages, {"role": "assistant", "content": row.response}]
        ids = tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=False, return_dict=True)
        if len(ids["input_ids"]) <= max_length:
            kept.append(row)
    return kept, len(rows) - len(kept)


def start_rmspec_score(run: Path, rows: list[CheckRow], work: Path) -> subprocess.Popen[str]:
    """`rmspec score RUN rows` (a subprocess: the command users run), started while vLLM starts."""
    path = work / "rows.jsonl"
    path.write_text("".join(json.dumps(row.score_row()) + "\n" for row in rows))
    command = [sys.executable, "-m", "rmspec", "score", str(run), str(path), "--out", str(work / "scored.jsonl")]
    with (work / "score.log").open("w") as log:  # a file, not a pipe: nobody reads it while vLLM starts
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True)


def rmspec_scores(proc: subprocess.Popen[str], work: Path) -> list[float]:
    """The `reward` column of the finished `rmspec score`."""
    if proc.wait() != 0:
        err = (work / "score.log").read_text(errors="replace")
        raise RmspecError(f"rmspec score failed on the check rows:\n{err[-1500:]}", "fix the run, then retry")
    return [float(json.loads(line)["reward"]) for line in (work / "scored.jsonl").read_text().splitlines()]


def vllm_rewards(url: str, model: str, tokenizer: Any, host: Hosting, rows: list[CheckRow]) -> dict[str, list[float]]:
    """Per client form and endpoint, vLLM's reward for each row."""
    out: dict[str, list[float]] = {}
    for row in rows:
        chat = [*row.messages, {"role": "assistant", "content": row.response}]
        rendered = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
        verl = verl_text(tokenizer, rendered)  # verl's own strip of the tokenizer's BOS text
        requests: dict[str, tuple[str, dict[str, Any]]] = {
            "classify messages": ("classify", {"messages": chat}),
            "classify verl text": ("classify", {"input": verl}),
            "pooling verl text": ("pooling", {"input": verl, "task": "classify"}),
            "classify text, add_special_tokens false": ("classify", {"input": rendered, "add_special_tokens": False}),
        }
        if host.read.head:
            requests["naive: text with BOS, default special tokens"] = ("classify", {"input": rendered})
        for name, (endpoint, body) in requests.items():
            answer = post(f"{url}/{endpoint}", {"model": model, "use_activation": False, **body})
            item = answer["data"][0]
            value = item["probs"][0] if endpoint == "classify" else item["data"][0]
            out.setdefault(name, []).append(float(value))
    return out


def image_rewards(url: str, model: str, rows: list[CheckRow]) -> dict[str, list[float]]:
    """A vision-language reward model's rows (rmspec.export.check_image_rows.ImageCheckRow): `messages` with OpenAI
    `image_url` parts to `/classify` and `/pooling`, vLLM's reward for each."""
    out: dict[str, list[float]] = {}
    for row in rows:
        body = {"model": model, "use_activation": False, "messages": row.vllm_messages()}  # type: ignore[attr-defined]
        out.setdefault("classify messages (image_url)", []).append(
            float(post(f"{url}/classify", body)["data"][0]["probs"][0])
        )
        out.setdefault("pooling messages (image_url)", []).append(
            float(post(f"{url}/pooling", {**body, "task": "classify"})["data"][0]["data"][0])
        )
    return out


def run_check(
    run: Path, folder: Path, host: Hosting, tokenizer: Any, python: str | None, rows: CheckRows, dtype: str = "auto"
) -> dict[str, Any]:
    """Start vLLM on `folder` in the checked precision, compare with `rmspec score`; the report (also
    written next to the run)."""
    python = vllm_python(python)
    device = engine_device(python)
    checked, why = choose(dtype, device, cpu_flags())
    used, too_long = fitting(rows.rows, tokenizer, host.max_length)
    if not used:
        raise RmspecError(
            f"every check row is longer than the run's max_length ({host.max_length} tokens)",
            "give shorter rows with --check-rows FILE",
        )
    rows = CheckRows(used, rows.source)
    with tempfile.TemporaryDirectory(prefix="rmspec-vllm-check-") as tmp:
        work = Path(tmp)
        log = folder / "vllm_check.log"
        command = [
            *serve_command(folder, host, python, free_port(), dtype=checked),
            "--enforce-eager",
        ]  # no compile: parity, not speed
        print(f"starting vLLM ({checked}; {why}): {' '.join(command)}", file=sys.stderr)
        scoring = start_rmspec_score(run, rows.rows, work)
        try:
            with running_server(command, log) as url:
                expected = rmspec_scores(scoring, work)
                if host.images is not None:  # pictures: messages with image_url parts only
                    got = image_rewards(url, str(folder), rows.rows)
                else:
                    got = vllm_rewards(url, str(folder), tokenizer, host, rows.rows)
        except RmspecError as exc:
            if "before it was ready" in exc.message:
                raise broken_environment(python) or exc from None
            raise
        finally:
            if scoring.poll() is None:
                scoring.kill()
                scoring.wait()
    return {
        **verdict(expected, got, tolerance(checked), rows.rows),
        "dtype_reason": why,
        "engine_device": device,
        "reference": "rmspec score in float32 (the reward rmspec evaluated)",
        **rows.report(),
        "rows_too_long": too_long,
        "vllm_python": python,
    }


def verdict(
    expected: list[float], got: dict[str, list[float]], tol: Tolerance, rows: list[CheckRow] | None = None
) -> dict[str, Any]:
    """The largest |vLLM - rmspec score| per client form; passed when every supported form is within the
    tolerance's bound on these rows. The naive form (the documented double-BOS trap) is reported, never
    counted. With pairs among the rows: the share whose order (chosen above rejected) vLLM keeps."""
    diffs = {form: max(abs(a - b) for a, b in zip(values, expected, strict=True)) for form, values in got.items()}
    counted = {form: d for form, d in diffs.items() if not form.startswith("naive")}
    worst = max(counted.values())
    bound = tol.bound(expected)
    report: dict[str, Any] = {
        "dtype": tol.dtype,
        "tolerance": tol.value,
        "tolerance_relative": tol.relative,
        "reward_scale": tol.scale(expected),
        "allowed_difference": bound,
        "rule": tol.rule,
        "max_abs_diff": worst,
        "passed": worst <= bound,
        "per_form": counted,
        "not_supported_forms": {form: d for form, d in diffs.items() if form not in counted},
    }
    order = pair_order(expected, {form: got[form] for form in counted}, rows or [])
    if order is not None:
        report["pairs_same_order"] = order
    return {**report, "rmspec_score": expected, "vllm": got}


def pair_order(expected: list[float], got: dict[str, list[float]], rows: list[CheckRow]) -> dict[str, Any] | None:
    """Of the pairs (a chosen row followed by the rejected row of the same id), how many vLLM orders as
    rmspec score does, in the worst form; None without pairs."""
    pairs = [
        i
        for i in range(len(rows) - 1)
        if rows[i].side == "chosen" and rows[i + 1].side == "rejected" and rows[i].id == rows[i + 1].id
    ]
    if not pairs:
        return None

    def same(values: list[float]) -> int:
        return sum((values[i] > values[i + 1]) == (expected[i] > expected[i + 1]) for i in pairs)

    kept = min(same(values) for values in got.values())
    return {"pairs": len(pairs), "same_order": kept, "share": kept / len(pairs)}


def write_report(run: Path, folder: Path, report: dict[str, Any]) -> Path:
    """RUN/export_vllm_check.json for a run directory; FOLDER/export_vllm_check.json otherwise."""
    target = (run if run.is_dir() and (run / "spec.yaml").is_file() else folder) / CHECK_FILE
    target.write_text(json.dumps(report, indent=2) + "\n")
    return target
