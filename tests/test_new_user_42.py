"""Issue 42, "what a new user meets, take two": each item run as a user runs it, in a subprocess, with
the console piped (as in CI), asserting the message, the exit code, the progress lines or the report.

The tiny model is built from a config (tests/helpers/models.py); nothing comes from the hub.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from helpers.models import build_model
from helpers.runs import make_run_spec, rmspec, write_pairs

REPO = Path(__file__).resolve().parents[1]


def _out(done: subprocess.CompletedProcess) -> str:
    return done.stdout + done.stderr


def _break_line(path: Path, number: int) -> None:
    """Line NUMBER (1-based) becomes JSON with a raw control character: invalid_json, at that line."""
    lines = path.read_text().splitlines()
    lines[number - 1] = '{"id": "bad", "prompt": "w1 \x01 w2", "chosen": "w1"'
    path.write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------- 1-3: install


def test_make_takes_torch_index_and_its_default_uses_pips_own_configuration(tmp_path):
    venv = tmp_path / "v"
    default = subprocess.run(["make", "-n", "install", f"VENV={venv}"], cwd=REPO, capture_output=True, text=True)
    cpu = subprocess.run(
        ["make", "-n", "install", f"VENV={venv}", "TORCH_INDEX=https://download.pytorch.org/whl/cpu"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert default.returncode == 0 and cpu.returncode == 0, default.stderr + cpu.stderr
    (torch_default,) = [line for line in default.stdout.splitlines() if "torch==2.13.0" in line]
    (torch_cpu,) = [line for line in cpu.stdout.splitlines() if "torch==2.13.0" in line]
    assert "--index-url" not in torch_default  # a machine that reaches only PyPI or a mirror: unchanged
    assert "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in torch_cpu
    assert "TORCH_INDEX=https://download.pytorch.org/whl/cpu" in torch_cpu  # the line an unreachable index prints
    readme = (REPO / "README.md").read_text()
    setup = readme.split("## Set-up on a new machine", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^make \w+", setup, re.M) == ["make demo", "make test"]  # still two set-up commands
    assert "TORCH_INDEX=https://download.pytorch.org/whl/cpu" in setup
    assert "TORCH_INDEX=https://download.pytorch.org/whl/cpu" in (REPO / "docs" / "install.md").read_text()


def test_the_wheel_ships_the_constraints_docs_install_reads(tmp_path):
    src = tmp_path / "src"
    skip = (".git", ".venv", "tests", "bench", "docs", "runs", "*.egg-info", "__pycache__", ".*cache")
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(*skip))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "d", src],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "d").glob("rmspec-*.whl")
    shipped = zipfile.ZipFile(wheel).read("rmspec/constraints.txt").decode()
    assert shipped == (REPO / "constraints.txt").read_text()
    install = (REPO / "docs" / "install.md").read_text()
    assert "unzip -p rmspec-0.1.0-py3-none-any.whl rmspec/constraints.txt > constraints.txt" in install


def test_no_command_message_cites_a_file_the_wheel_lacks():
    """Strings a command prints (not docstrings, not the spec's field descriptions, which are the
    schema's documentation) name no bench/results or docs/ page: the wheel carries neither."""
    cited = re.compile(r"(bench/results|docs)/[\w./-]+\.md")
    found = []
    for path in sorted((REPO / "rmspec").rglob("*.py")):
        if "spec" in path.relative_to(REPO / "rmspec").parts[:1]:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            hit = cited.search(node.value) if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
            if hit and id(node) not in docstrings:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {hit.group(0)}")
    assert found == []


# ---------------------------------------------------------------- 4-5: models found before any run

COMPOSITE = """version: 1
name: comp
approach:
  kind: composite
  components:
    - {{name: fmt, kind: regex, pattern: "^\\\\d+$"}}
    - {{name: len, kind: length, tokenizer: {tokenizer}, mode: target, target_tokens: 4}}
data:
  validation: val.jsonl
output: {{dir: runs/comp}}
"""


def _composite(tmp: Path, tokenizer: str) -> Path:
    (tmp / "val.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"{a}+{a}?", "response": r}) + "\n"
            for a, r in ((1, "2"), (2, "four, I think"), (3, "6"), (4, "w1 w2 w3 w4 w5 w6 w7 w8 w9"))
        )
    )
    spec = tmp / "comp.yaml"
    spec.write_text(COMPOSITE.format(tokenizer=tokenizer))
    return spec


def test_an_unreachable_hub_tokenizer_is_a_located_error_before_any_run(tmp_path):
    _composite(tmp_path, "Qwen/Qwen2.5-0.5B-Instruct")
    for command in (("validate", "comp.yaml", "--check-paths"), ("plan", "comp.yaml"), ("run", "comp.yaml")):
        started = time.monotonic()
        done = rmspec(*command, cwd=tmp_path)
        said = _out(done)
        assert done.returncode == 2, said
        assert "comp.yaml:7:" in said and "approach.components[1].tokenizer" in said
        assert "cannot find the tokenizer 'Qwen/Qwen2.5-0.5B-Instruct'" in said
        assert "the local folder" in said and "the Hugging Face cache" in said and "HF_HUB_OFFLINE is set" in said
        assert "hf download Qwen/Qwen2.5-0.5B-Instruct" in said
        assert "internal error" not in said and "Traceback" not in said
        assert time.monotonic() - started < 30  # no retries
    assert not (tmp_path / "runs").exists()  # run stopped before its directory


def test_a_mistyped_model_folder_says_it_does_not_exist_with_the_path_and_near_names(tmp_path):
    build_model("llama", tmp_path / "models" / "my-minilm2")
    write_pairs(tmp_path / "pairs.jsonl", 40)
    spec = make_run_spec(tmp_path, model="./models/my-minilm")  # type: ignore[arg-type]  # as a user writes it
    for command in (("validate", spec.name, "--check-paths"), ("plan", spec.name), ("run", spec.name)):
        done = rmspec(*command, cwd=tmp_path)
        said = _out(done)
        assert done.returncode == 2, said
        assert "model.name_or_path: the model folder './models/my-minilm' does not exist" in said
        assert f"resolved: {tmp_path / 'models' / 'my-minilm'}" in said
        assert f"did you mean {tmp_path / 'models' / 'my-minilm2'}?" in said
        assert "cannot find the shape" not in said  # the old, wrong hint
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- 6: columns up front, the right recovery


def test_a_missing_column_is_found_by_validate_and_plan_and_run_touches_nothing(tmp_path):
    spec = make_run_spec(tmp_path, rows=40)
    rows = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    (tmp_path / "pairs.jsonl").write_text(
        "".join(json.dumps({k: r[k] for k in ("id", "prompt", "chosen")}) + "\n" for r in rows)
    )
    for command in ("validate", "plan", "run"):
        done = rmspec(command, spec.name, cwd=tmp_path)
        assert done.returncode == 2, _out(done)
        assert "data.mapping: the source has no column(s) rejected -> 'rejected'; it has: id, prompt, chosen" in _out(
            done
        )
    assert not (tmp_path / "runs").exists()


def test_a_run_failed_by_its_data_says_fix_then_overwrite_never_resume(tmp_path):
    spec = make_run_spec(tmp_path, rows=40, training="  max_steps: 2\n  eval_steps: 1")
    _break_line(tmp_path / "pairs.jsonl", 7)
    done = rmspec("run", spec.name, "--set", "data.max_rejected=0", cwd=tmp_path)
    said = _out(done)
    assert done.returncode == 2, said
    rejects = tmp_path / "runs" / "tiny" / "rejects.jsonl"
    assert (
        f"data: 40 rows read, 39 kept, 1 dropped (2.5% of those read): invalid_json 1; each with its reason in {rejects}"
        in said
    )
    assert "data.max_rejected: 1 row rejected, more than data.max_rejected 0 (invalid_json 1)" in said
    assert "step 1/" not in said and not list((tmp_path / "runs" / "tiny" / "checkpoints").glob("checkpoint-*"))
    rerun = f"rmspec run {spec} --set data.max_rejected=0 --overwrite"
    assert f"`{rerun}` starts afresh" in said and "`rmspec run --resume" not in said
    again = rmspec("run", spec.name, "--set", "data.max_rejected=0", cwd=tmp_path)
    assert again.returncode == 2 and "already holds a run (state: failed)" in _out(again)
    assert f"`{rerun}` starts afresh" in _out(again) and "`rmspec run --resume" not in _out(again)
    status = rmspec("status", "runs/tiny", cwd=tmp_path)
    (nxt,) = [line for line in status.stdout.splitlines() if line.startswith("next")]
    assert rerun in nxt and "rmspec run --resume" not in nxt.replace("--resume would", "")


def test_max_rejected_takes_a_count_or_a_fraction_and_nothing_else(tmp_path):
    spec = make_run_spec(tmp_path, rows=20)
    assert rmspec("validate", spec.name, "--set", "data.max_rejected=0.05", cwd=tmp_path).returncode == 0
    assert rmspec("validate", spec.name, "--set", "data.max_rejected=100", cwd=tmp_path).returncode == 0
    bad = rmspec("validate", spec.name, "--set", "data.max_rejected=1.5", cwd=tmp_path)
    assert bad.returncode == 2 and "1.5 is neither a count" in _out(bad)


# ---------------------------------------------------------------- 7, 10, 11, 13: one tiny run, read like a user


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A run with one broken line, evaluated every step but logged every 2, barely trained (some pairs misranked)."""
    tmp = tmp_path_factory.mktemp("tiny-run-with-a-long-folder-name-so-paths-pass-eighty-columns")
    spec = make_run_spec(tmp, rows=120, training="  max_steps: 4\n  eval_steps: 1\n  warmup_ratio: 0.25", batch=4)
    spec.write_text(spec.read_text().replace("learning_rate: 3.0e-3", "learning_rate: 2.0e-4"))
    _break_line(tmp / "pairs.jsonl", 42)
    done = rmspec("run", spec.name, cwd=tmp)
    assert done.returncode == 0, _out(done)
    return tmp, spec, done


def test_the_run_console_counts_dropped_rows_and_keeps_rmspecs_own_message(tiny_run):
    tmp, _spec, done = tiny_run
    said = _out(done)
    rejects = tmp / "runs" / "tiny" / "rejects.jsonl"
    row = json.loads(rejects.read_text().splitlines()[0])
    assert row["reason"] == "invalid_json" and row["detail"].startswith(f"{tmp / 'pairs.jsonl'}:42:")
    assert f"1 dropped (0.8% of those read): invalid_json 1; each with its reason in {rejects}" in said
    assert "Failed to load JSON" not in said and "in row 41" not in said  # the datasets library's own message
    assert "Failed to load JSON" not in (tmp / "runs" / "tiny" / "train.log").read_text()


def test_the_console_in_a_pipe_keeps_paths_and_commands_whole(tiny_run):
    tmp, _spec, done = tiny_run
    (launch,) = [
        line for line in _out(done).splitlines() if line.startswith("$ ") and "rmspec.launch.entrypoint" in line
    ]
    assert len(launch) > 80 and launch.endswith(str(tmp / "runs" / "tiny" / "plan.json"))
    (where,) = [line for line in _out(done).splitlines() if line.startswith("run directory:")]
    assert where.endswith(str(tmp / "runs" / "tiny" / "train.log"))


def test_progress_is_one_current_line_per_step_then_each_stage_after_training(tiny_run):
    tmp, _spec, done = tiny_run
    lines = _out(done).splitlines()
    steps = [line for line in lines if re.match(r"step \d+/4 ", line)]
    assert [int(re.match(r"step (\d+)", s).group(1)) for s in steps] == [1, 2, 3, 4]  # once each
    metrics = [json.loads(line) for line in (tmp / "runs" / "tiny" / "metrics.jsonl").read_text().splitlines()]
    for line, step in zip(steps, (1, 2, 3, 4)):
        trained = [r for r in metrics if r.get("step") == step and "train/rm/loss" in r]
        evaluated = [r for r in metrics if r.get("step") == step and "eval/rm/accuracy" in r and "model_step" not in r]
        assert (re.search(r"(?<!eval )loss ", line) is not None) == bool(trained), line  # no stale loss
        if trained:
            assert f"loss {trained[0]['train/rm/loss']:.4g}" in line
        assert f"eval acc {evaluated[0]['eval/rm/accuracy']:.4g}" in line
    (final,) = [line for line in lines if line.startswith("final evaluation (the model of step 4)")]
    assert "eval acc" in final and "lr " not in final
    for stage in ("final evaluation: the validation split", "saving the model to", "scoring the validation split"):
        assert any(line.startswith(stage) for line in lines), stage
    assert lines.index(steps[-1]) < lines.index(final)


def test_eval_reports_n_of_n_rate_and_the_end_of_each_scoring_pass(tiny_run):
    tmp, _spec, _done = tiny_run
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "RMSPEC_PROGRESS_EVERY": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "eval", "runs/tiny"], cwd=tmp, env=env, capture_output=True, text=True
    )
    said = _out(done)
    assert done.returncode == 0, said
    validation = [
        json.loads(line) for line in (tmp / "runs" / "tiny" / "eval" / "validation.jsonl").read_text().splitlines()
    ]
    total = 2 * len(validation)
    ticks = re.findall(r"scoring the validation split: ([\d,]+)/([\d,]+) sequences, [\d.,]+/s", said)
    assert ticks and all(int(n.replace(",", "")) == total for _, n in ticks)
    assert int(ticks[-1][0].replace(",", "")) == total and "done in" in said


def test_the_report_shows_the_setup_throughput_curves_and_worst_misranked_pairs(tiny_run):
    tmp, _spec, _done = tiny_run
    run = tmp / "runs" / "tiny"
    html = (run / "report.html").read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    for section in ("Training setup", "Time and throughput", "Worst misranked pairs"):
        assert f"<h2>{section}</h2>" in html
    assert "learning_rate 0.0002 lr_scheduler linear" in text and "warmup_ratio 0.25" in text
    status = json.loads((run / "status.json").read_text())
    assert f"pairs per second {4 * 4 / status['train_seconds']:,.1f}" in text
    assert html.count('alt="training curve"') == 3  # loss, accuracy, learning rate
    assert "validation evaluated at 4 steps (1 to 4)" in text
    assert "logged steps; last step 4," in text  # the stage notes after training carry no step
    rows = [json.loads(line) for line in (run / "eval" / "validation.jsonl").read_text().splitlines()]
    wrong = sorted(
        (r for r in rows if r["score_chosen"] < r["score_rejected"]),
        key=lambda r: r["score_chosen"] - r["score_rejected"],
    )
    assert wrong, "the barely trained model should misrank some held-out pairs"
    worst = text.split("Worst misranked pairs", 1)[1]
    right = len(rows) - len(wrong)
    assert f"all: {100 * right / len(rows):.1f}% of {len(rows)} pairs ranked right, {len(wrong)} misranked" in worst
    first = wrong[0]
    assert f"{first['id']} {first['score_chosen'] - first['score_rejected']:.3f}" in worst
    source = {r["id"]: r for r in map(json.loads, (tmp / "pairs.jsonl").read_text().splitlines()[:41])}
    assert source[first["id"]]["prompt"] in worst  # the prompt, from the data file itself


# ---------------------------------------------------------------- 8, 9: data report and score rejects


def test_data_report_names_where_rejects_went_and_hides_the_libraries_message(tiny_run, tmp_path):
    tmp, spec, _done = tiny_run
    plain = rmspec("data", "report", spec.name, cwd=tmp)
    assert plain.returncode == 0, _out(plain)
    assert "rejected rows (not written: add --rejects FILE to write each with its reason)" in plain.stdout
    out = tmp_path / "rejects.jsonl"
    written = rmspec("data", "report", spec.name, "--rejects", str(out), cwd=tmp)
    assert f"rejected rows (each written with its reason to {out})" in written.stdout
    assert json.loads(out.read_text().splitlines()[0])["reason"] == "invalid_json"
    assert "Failed to load JSON" not in _out(plain) + _out(written)


def test_score_rejects_say_at_column_once(tiny_run, tmp_path):
    tmp, _spec, _done = tiny_run
    responses = tmp_path / "responses.jsonl"
    responses.write_text('{"prompt": "w1", "response": "w2"}\n{"prompt": "w1 \x01", "response": "w2"}\n')
    done = rmspec("score", "runs/tiny", str(responses), "--out", str(tmp_path / "scored.jsonl"), cwd=tmp)
    assert done.returncode == 0, _out(done)
    rejects = "".join(p.read_text() for p in tmp_path.glob("*rejects*"))
    assert "Invalid control character" in rejects and "at at" not in rejects


# ---------------------------------------------------------------- 10: compare in a pipe


def test_compare_in_a_pipe_shows_whole_run_names(tiny_run, tmp_path):
    tmp, _spec, _done = tiny_run
    a = tmp_path / "quickstart-learning-rate-two-e-minus-four-seed-seven"
    b = tmp_path / "quickstart-learning-rate-two-e-minus-four-seed-eight"
    shutil.copytree(tmp / "runs" / "tiny", a, ignore=shutil.ignore_patterns("checkpoints", "model", "cache"))
    shutil.copytree(tmp / "runs" / "tiny", b, ignore=shutil.ignore_patterns("checkpoints", "model", "cache"))
    done = rmspec("compare", str(a), str(b), cwd=tmp_path)
    assert done.returncode == 0, _out(done)
    assert a.name in done.stdout and b.name in done.stdout and "…" not in done.stdout


# ---------------------------------------------------------------- 12: a composite run's summary


def test_a_composite_run_prints_its_summary_like_a_trained_run(tmp_path):
    tokenizer = build_model("llama", tmp_path / "tok")
    _composite(tmp_path, str(tokenizer))
    done = rmspec("run", "comp.yaml", cwd=tmp_path)
    assert done.returncode == 0, _out(done)
    rows = [
        json.loads(line) for line in (tmp_path / "runs" / "comp" / "eval" / "validation.jsonl").read_text().splitlines()
    ]
    rewards = [r["reward"] for r in rows]
    formats = [r["values"]["fmt"] for r in rows]
    assert "composite run completed: runs/comp" in done.stdout
    assert re.search(rf"reward mean\s+│\s+{sum(rewards) / len(rewards):.4f}", done.stdout)
    assert re.search(rf"fmt\s+│ regex\s+│\s+1 │\s+{sum(formats) / len(formats):.4f}", done.stdout)
    assert re.search(r"rows scored\s+│\s+4", done.stdout)
