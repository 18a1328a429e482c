"""Issue 52, "what a new user meets, take three", items 1-9: each run as a user runs it, in a subprocess
with the console piped (as tests/test_new_user_42.py does), asserting the message, the exit code, the
files left behind or the docs against what the code does.

Models: a tiny Llama built from a config (tests/helpers/models.py), the packaged all-MiniLM-L6-v2 (only
named, never loaded: its name is what the typo is compared with) and the multimodal example's tiny
Qwen2-VL (`rmspec init --example multimodal` builds it); nothing comes from the hub.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib

from helpers.models import build_model
from helpers.runs import make_run_spec, rmspec, write_pairs

REPO = Path(__file__).resolve().parents[1]
PACKAGED = "sentence-transformers/all-MiniLM-L6-v2"
TYPO = "sentence-transformers/all-MiniLM-L6-v3"


def _out(done: subprocess.CompletedProcess) -> str:
    return done.stdout + done.stderr


def _spec_with(tmp: Path, model: str, name: str = "tiny") -> Path:
    """The tiny run's spec, naming ``model`` as a user would write it (line 3: model: {name_or_path: ...})."""
    write_pairs(tmp / "pairs.jsonl", 40)
    return make_run_spec(tmp, name=name, model=model)  # type: ignore[arg-type]  # a name, as written


def _online(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """rmspec with HF_HUB_OFFLINE unset: validate and plan must still never ask the hub."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env |= {"NO_COLOR": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


# ---------------------------------------------------------------- 1: validate finds a mistyped model


def test_validate_refuses_a_mistyped_model_folder_without_check_paths(tmp_path):
    build_model("llama", tmp_path / "models" / "my-minilm2")
    spec = _spec_with(tmp_path, "./models/my-minilm")
    done = rmspec("validate", spec.name, cwd=tmp_path)
    said = _out(done)
    assert done.returncode == 2, said
    assert "tiny.yaml:3:" in said and "model.name_or_path: the model folder './models/my-minilm' does not exist" in said
    assert f"did you mean {tmp_path / 'models' / 'my-minilm2'}?" in said
    assert "Traceback" not in said


def test_validate_refuses_a_mistyped_hub_id_offline_and_suggests_the_installed_model(tmp_path):
    spec = _spec_with(tmp_path, TYPO)
    done = rmspec("validate", spec.name, cwd=tmp_path)
    said = _out(done)
    assert done.returncode == 2, said
    assert "tiny.yaml:3:" in said and f"cannot find the model {TYPO!r}" in said
    assert "HF_HUB_OFFLINE is set" in said and f"did you mean {PACKAGED}" in said


def test_validate_stays_light_on_the_mistyped_spec(tmp_path):
    spec = _spec_with(tmp_path, TYPO)
    code = (
        "import sys\nfrom rmspec.cli.main import cli\nfrom rmspec.errors import SpecError\n"
        f"try:\n    cli.main(['validate', {str(spec)!r}], standalone_mode=False)\n"
        "except SpecError as exc:\n    print('REFUSED', exc.issues[0].path)\n"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'datasets') if m in sys.modules])\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "REFUSED model.name_or_path" in done.stdout and "HEAVY []" in done.stdout, done.stdout + done.stderr


def test_a_valid_hub_id_that_is_not_cached_passes_where_the_hub_is_reachable(tmp_path):
    """Not cached, not in the catalog, hub reachable: validate cannot tell a typo from a real model: valid."""
    spec = _spec_with(tmp_path, "some-org/a-model-only-the-hub-has")
    done = _online("validate", spec.name, cwd=tmp_path)
    assert done.returncode == 0, _out(done)
    assert "valid" in done.stdout


def test_a_catalogued_hub_model_offline_is_valid_with_a_note(tmp_path):
    spec = _spec_with(tmp_path, "Qwen/Qwen2.5-0.5B-Instruct")
    done = rmspec("validate", spec.name, cwd=tmp_path)
    assert done.returncode == 0, _out(done)
    assert "note: " in done.stderr and "tiny.yaml:3:" in done.stderr
    assert "the built-in catalog (qwen2.5-0.5b)" in done.stderr and "`rmspec run` here needs its weights" in done.stderr


# ---------------------------------------------------------------- 2: plan and run on the mistyped hub id


def test_plan_and_run_on_a_mistyped_hub_id_say_where_and_suggest_the_installed_name(tmp_path):
    spec = _spec_with(tmp_path, TYPO)
    for command in ("plan", "run"):
        done = rmspec(command, spec.name, cwd=tmp_path)
        said = _out(done)
        assert done.returncode == 2, said
        assert "tiny.yaml:3:" in said and "model.name_or_path" in said, said
        assert f"check the name: did you mean {PACKAGED}" in said
        assert "give the shape in the spec" not in said  # the old hint, which blamed the spec's shape
        assert "Traceback" not in said
    online = _online("plan", spec.name, cwd=tmp_path)  # the hub reachable: plan cannot size it either
    assert online.returncode == 2, _out(online)
    assert "tiny.yaml:3:" in online.stderr and f"cannot size the model {TYPO!r}" in online.stderr
    assert f"did you mean {PACKAGED}" in online.stderr
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- 9: init_from of a stage not yet run


@pytest.mark.parametrize("shipped", ["two_stage_scaled_bt", "judge_grpo"])
def test_a_second_stage_plans_before_its_first_has_run_and_run_refuses(tmp_path, shipped):
    spec = REPO / "specs" / f"{shipped}.yaml"
    plan = rmspec("plan", str(spec), cwd=tmp_path)
    assert plan.returncode == 0, _out(plan)
    assert re.search(rf"note: \S+{shipped}\.yaml:\d+:\d+ model\.init_from: the run's model folder", plan.stderr)
    assert "does not exist yet" in plan.stderr and "rmspec plan:" in plan.stdout
    validate = rmspec("validate", str(spec), cwd=tmp_path)
    assert validate.returncode == 0, _out(validate)
    run = rmspec("run", str(spec), cwd=tmp_path)
    assert run.returncode == 2, _out(run)
    assert "model.init_from: the run's model folder" in run.stderr and "does not exist" in run.stderr
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- 3, 7, 8: one tiny run


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A tiny Llama trained for 8 steps with two pairs benchmarks: one named by its file, one by name:."""
    tmp = tmp_path_factory.mktemp("run52")
    write_pairs(tmp / "holdout_a.jsonl", 16, seed=1)
    write_pairs(tmp / "control.jsonl", 16, seed=2)
    spec = make_run_spec(tmp, rows=64)
    text = spec.read_text().replace(
        "benchmarks: []",
        "benchmarks: [{kind: pairs, path: holdout_a.jsonl}, {kind: pairs, path: control.jsonl, name: ctl}]",
    )
    spec.write_text(text)
    done = rmspec("run", spec.name, cwd=tmp, timeout=600)
    assert done.returncode == 0, _out(done)[-4000:]
    return SimpleNamespace(tmp=tmp, spec=spec, root=tmp / "runs" / "tiny", done=done)


def test_each_pairs_benchmark_is_named_by_its_file_or_its_name(tiny_run):
    results = json.loads((tiny_run.root / "results.json").read_text())
    assert set(results["benchmarks"]) == {"holdout_a", "ctl"}
    assert {p.name for p in (tiny_run.root / "eval").glob("*.jsonl")} >= {"holdout_a.jsonl", "ctl.jsonl"}
    rows = [line for line in tiny_run.done.stdout.splitlines() if line.startswith("│")]
    named = {line.split("│")[1].strip() for line in rows}
    assert {"holdout_a", "ctl"} <= named and "pairs" not in named, tiny_run.done.stdout[-2000:]


def test_validate_refuses_a_benchmark_name_another_benchmark_has(tmp_path):
    spec = _spec_with(tmp_path, str(build_model("llama", tmp_path / "m")))
    write_pairs(tmp_path / "a.jsonl", 4)
    block = "eval:\n  validation: true\n  benchmarks:\n    - {kind: pairs, path: a.jsonl}\n"
    spec.write_text(
        spec.read_text().replace(
            "eval: {validation: true, benchmarks: []}", block + "    - {kind: pairs, path: pairs.jsonl, name: a}"
        )
    )
    done = rmspec("validate", spec.name, cwd=tmp_path)
    said = _out(done)
    assert done.returncode == 2, said + spec.read_text()
    assert "eval.benchmarks.1.name: the name 'a' is also the name of eval.benchmarks.0" in said
    line = next(i for i, text in enumerate(spec.read_text().splitlines(), 1) if "name: a}" in text)
    assert f"tiny.yaml:{line}:" in said  # at the repeated name


def test_the_run_model_can_be_read_by_whoever_reads_the_run(tiny_run):
    umask = os.umask(0)
    os.umask(umask)
    model = tiny_run.root / "model"
    assert stat.S_IMODE(model.stat().st_mode) == stat.S_IMODE(tiny_run.root.stat().st_mode) == 0o777 & ~umask
    files = [p for p in model.rglob("*") if p.is_file()]
    assert any(p.name == "model.safetensors" for p in files)
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {p.name: oct(0o666 & ~umask) for p in files}


def test_score_leaves_only_its_output_when_nothing_was_rejected(tiny_run):
    tmp = tiny_run.tmp
    (tmp / "clean.jsonl").write_text(
        "".join(json.dumps({"prompt": f"w{i}", "response": f"w1 w{i + 3}"}) + "\n" for i in range(6))
    )
    done = rmspec("score", "runs/tiny", "clean.jsonl", "--out", "clean_out.jsonl", cwd=tmp)
    assert done.returncode == 0, _out(done)
    assert len((tmp / "clean_out.jsonl").read_text().splitlines()) == 6
    assert not (tmp / "clean_out.jsonl.progress.json").exists()
    assert not (tmp / "clean_out.rejects.jsonl").exists()
    assert "Loading weights" not in done.stderr
    assert "rejects: none (no rejects file written)" in done.stderr
    again = rmspec("score", "runs/tiny", "clean.jsonl", "--out", "clean_out.jsonl", "--resume", cwd=tmp)
    assert again.returncode == 0, _out(again)
    assert "is already complete (6 rows scored, 0 rejected)" in again.stderr


def test_score_keeps_the_rejects_of_rejected_rows_and_no_progress_record(tiny_run):
    tmp = tiny_run.tmp
    rows = [
        json.dumps({"prompt": "w3", "response": "w1 w4"}),
        "{not json",
        json.dumps({"prompt": "w5", "response": "w2"}),
    ]
    (tmp / "mixed.jsonl").write_text("\n".join(rows) + "\n")
    done = rmspec("score", "runs/tiny", "mixed.jsonl", "--out", "mixed_out.jsonl", "--json", cwd=tmp)
    assert done.returncode == 0, _out(done)
    summary = json.loads(done.stdout)
    assert summary["scored"] == 2 and summary["rejected"] == 1
    assert summary["rejects"] == str(tmp / "mixed_out.rejects.jsonl") or Path(summary["rejects"]).name == (
        "mixed_out.rejects.jsonl"
    )
    (reject,) = [json.loads(x) for x in (tmp / "mixed_out.rejects.jsonl").read_text().splitlines()]
    assert reject["row"] == 1
    assert not (tmp / "mixed_out.jsonl.progress.json").exists()


# ---------------------------------------------------------------- 4: the multimodal plan


@pytest.fixture(scope="module")
def multimodal_example(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mm52")
    done = rmspec("init", "--example", "multimodal", cwd=tmp, timeout=300)
    assert done.returncode == 0, _out(done)
    return tmp


def test_the_multimodal_plan_notes_its_vision_lines_and_samples_the_image_rows(multimodal_example):
    done = rmspec("plan", "multimodal.yaml", cwd=multimodal_example)
    assert done.returncode == 0, _out(done)
    text = " ".join(done.stdout.split())
    assert "note: vision tower and projector: " in text and "note: visual tokens per image: " in text
    assert "warning: vision tower and projector" not in text and "warning: visual tokens" not in text
    assert "no pair lengths could be sampled" not in text
    pairs = len((multimodal_example / "multimodal" / "train.jsonl").read_text().splitlines())
    assert "sampled pairs at 4 chars/token" in text and f"from {pairs} sampled pairs" in text
    plan = json.loads(rmspec("plan", "multimodal.yaml", "--json", cwd=multimodal_example).stdout)
    assert any(n.startswith("vision tower and projector: ") for n in plan["notes"])
    assert not any(w.startswith("vision tower and projector: ") for w in plan["warnings"])


# ---------------------------------------------------------------- 5: make demo's install says what it does


def test_make_install_says_what_each_step_installs_before_it_runs(tmp_path):
    done = subprocess.run(["make", "-n", "install", f"VENV={tmp_path / 'v'}"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = [i for i, line in enumerate(lines) if " -m venv " in line or "pip install" in line]
    assert len(steps) == 3, lines
    for i in steps:
        assert lines[i - 1].startswith('echo "== '), (lines[i - 1], lines[i])
    assert "minutes" in lines[steps[0] - 1]
    assert "torch" in lines[steps[1] - 1] and "rmspec" in lines[steps[2] - 1]


# ---------------------------------------------------------------- 6: the docs say what the code does


def test_the_extras_table_has_a_row_for_every_extra():
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    install = (REPO / "docs" / "install.md").read_text()
    table = install.split("| extra | for |", 1)[1].split("\n\n", 1)[0]
    rows = set(re.findall(r"^\| `([\w-]+)` \|", table, re.M))
    assert rows == extras


def test_the_saved_processor_is_where_docs_multimodal_says(tmp_path):
    """save_image_processor as a run calls it, on the tiny Qwen2-VL's processor with model.vision's bounds:
    processor_config.json holds them as size {shortest_edge, longest_edge}, and the docs say that file."""
    from transformers import AutoTokenizer

    from rmspec.train.final_model import save_image_processor
    from rmspec.vision.processor import load_processor
    from rmspec.vision.tiny import build_tiny_vlm

    source = build_tiny_vlm(tmp_path / "vlm")
    processor = load_processor(str(source), AutoTokenizer.from_pretrained(source), min_pixels=12544, max_pixels=50176)
    saved = tmp_path / "saved"
    saved.mkdir()
    trainer = SimpleNamespace(data_collator=SimpleNamespace(encoder=SimpleNamespace(processor=processor)))
    save_image_processor(trainer, saved)
    config = json.loads((saved / "processor_config.json").read_text())
    assert config["image_processor"]["size"] == {"shortest_edge": 12544, "longest_edge": 50176}
    assert not (saved / "preprocessor_config.json").exists()
    docs = " ".join((REPO / "docs" / "multimodal.md").read_text().split())
    assert "`preprocessor_config.json`" not in docs
    assert "(`processor_config.json`: its `image_processor` section" in docs
    assert "as `size: {shortest_edge, longest_edge}`" in docs
