"""Data size counted cheaply, time from FLOPs, and the plan artifact's refusals."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from helpers import REPO
from helpers.plan import HOST, _spec
from rmspec.errors import PlanError
from rmspec.plan import compile_plan, load_plan, save_plan
from rmspec.plan.catalog import catalog_config
from rmspec.plan.estimate import count_rows, flops_per_token
from rmspec.plan.hardware import HostFacts
from rmspec.plan.model_shape import shape_from_config
from rmspec.spec import load_spec


def test_counts_jsonl_csv_and_sqlite_rows(tmp_path):
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"prompt": str(i)}) + "\n" for i in range(7)) + "\n")
    (tmp_path / "b.csv").write_text("prompt,chosen,rejected\n" + "".join(f'p{i},c,"r, with comma"\n' for i in range(5)))
    spec = load_spec(_spec(tmp_path, "  source:\n    kind: files\n    paths: [a.jsonl, b.csv]\n")).spec
    assert count_rows(spec.data.source, tmp_path) == (12, "counted in 2 file(s)")

    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        conn.execute("CREATE TABLE pairs (prompt TEXT, chosen TEXT, rejected TEXT, ok INT)")
        conn.executemany("INSERT INTO pairs VALUES (?, ?, ?, ?)", [("p", "c", "r", i % 3) for i in range(30)])
    spec = load_spec(
        _spec(
            tmp_path,
            "  source:\n    kind: sql\n    sqlite: db.sqlite\n"
            "    query: SELECT prompt, chosen, rejected FROM pairs WHERE ok = 0;\n",
        )
    ).spec
    rows, how = count_rows(spec.data.source, tmp_path)
    assert rows == 10 and "COUNT" in how

    spec = load_spec(_spec(tmp_path, "  source:\n    kind: files\n    paths: [a.jsonl]\n    limit: 3\n")).spec
    assert count_rows(spec.data.source, tmp_path)[0] == 3


def test_hub_sources_have_no_row_count_but_a_step_time():
    plan = compile_plan(load_spec(REPO / "specs" / "hh_bt.yaml"), host=HOST).to_json()
    est = plan["estimate"]
    assert est["rows"] is None and est["steps_per_epoch"] is None and est["seconds_per_step"] > 0


def _minilm_per_token(seq_len: int) -> float:
    # MiniLM: 6 blocks of 4h^2 + 2hi (+ biases, norms); 6N per token plus attention 12*L*h*s.
    h, i, layers = 384, 1536, 6
    block = 4 * h * h + 4 * h + 2 * h * i + i + h + 2 * 2 * h
    return 6 * layers * block + 12 * layers * h * seq_len


def _write_pairs(path: Path) -> None:
    # 39 short rows: prompt 40 chars, chosen 80, rejected 120 -> sequences of 120 and 160 chars;
    # one row whose rejected answer (2,000 chars) is longer than max_length 64 allows.
    rows = [{"prompt": "p" * 40, "chosen": "c" * 80, "rejected": "r" * 120} for _ in range(39)]
    rows.append({"prompt": "p" * 40, "chosen": "c" * 80, "rejected": "r" * 2000})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_epoch_time_from_flops_by_hand(tmp_path):
    _write_pairs(tmp_path / "pairs.jsonl")
    spec = _spec(tmp_path, "  source:\n    kind: files\n    paths: [pairs.jsonl]\n")
    plan = compile_plan(load_spec(spec, ["hardware.cpu_memory_gb=16", "training.max_length=64"]), host=HOST).to_json()
    est = plan["estimate"]
    train = int(40 * 0.9)  # validation_fraction 0.1
    steps = -(-train // 16)
    assert (est["rows"], est["train_rows"], est["steps_per_epoch"]) == (40, train, steps)
    # Tokens per sequence, by hand at 4 chars/token: 39 x (30 + 40) tokens, then 30 and 2040/4 = 510
    # clipped to max_length 64; the mean is 2824 / 80 = 35.3, plus 10 % padding = 38.83 -> 39.
    assert est["tokens_per_sequence"] == 39
    assert est["tokens_per_sequence_source"].startswith("mean 35 tokens from 40 sampled rows at 4 chars/token")
    assert "every sequence counted at max_length" not in est["note"]
    tokens = 16 * 2 * 39
    assert est["tokens_per_step"] == tokens
    # CPU: 0.39 TFLOPS per 2 cores x MFU 0.5; HOST has 2 cores.
    seconds = _minilm_per_token(39) * tokens / (0.39e12 * 0.5)
    assert est["seconds_per_step"] == pytest.approx(seconds, rel=1e-3)
    assert est["seconds_per_epoch"] == pytest.approx(steps * seconds, abs=0.05)  # rounded to 0.1 s
    # The memory model stays at max_length (an upper bound), whatever the data's lengths.
    assert plan["tokens_per_step"] == 16 * 2 * 64
    (tmp_path / "pairs.jsonl").write_text(
        (tmp_path / "pairs.jsonl").read_text().replace("r" * 120, "r" * 1000).replace("c" * 80, "c" * 1000)
    )
    longer = compile_plan(load_spec(spec, ["hardware.cpu_memory_gb=16", "training.max_length=64"]), host=HOST).to_json()
    assert longer["memory_per_device_gb"] == plan["memory_per_device_gb"]
    assert longer["estimate"]["tokens_per_sequence"] == 64  # clipped: min(mean + padding, max_length)
    # Eight cores: four times the two-core figure.
    eight = compile_plan(
        load_spec(spec, ["hardware.cpu_memory_gb=16", "training.max_length=64"]), host=HostFacts((), 16.0, (), 8)
    ).to_json()["estimate"]
    assert eight["peak_tflops_total"] == pytest.approx(4 * 0.39)
    assert eight["cpu_cores"] == 8


def test_quickstart_estimate_is_near_the_measured_run():
    # Measured: 180 steps in 182 s on the 2-core machine (bench/results/train_quickstart.md, idle rerun).
    plan = compile_plan(
        load_spec(REPO / "specs" / "quickstart.yaml", ["hardware.cpu_memory_gb=16"]), host=HOST
    ).to_json()
    est = plan["estimate"]
    assert est["steps_per_epoch"] == 180
    assert 80 <= est["tokens_per_sequence"] <= 100  # measured: ~2,944 token slots / 32 sequences = 92
    assert 182 * 0.8 <= est["seconds_per_epoch"] <= 182 * 1.2


def test_length_guess_from_csv_and_sqlite_and_where_it_is_not_made(tmp_path):
    (tmp_path / "b.csv").write_text(
        "prompt,chosen,rejected\n" + "".join(f"{'p' * 40},{'c' * 40},{'r' * 80}\n" for _ in range(5))
    )
    est = compile_plan(
        load_spec(_spec(tmp_path, "  source:\n    kind: files\n    paths: [b.csv]\n")), host=HOST
    ).to_json()["estimate"]
    # sequences of 80 and 120 chars: 20 and 30 tokens, mean 25, + 10 % = 27.5 -> 28
    assert est["tokens_per_sequence"] == 28

    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        conn.execute("CREATE TABLE pairs (prompt TEXT, chosen TEXT, rejected TEXT)")
        conn.executemany("INSERT INTO pairs VALUES (?, ?, ?)", [("p" * 40, "c" * 80, "r" * 120)] * 600)
    est = compile_plan(
        load_spec(
            _spec(
                tmp_path,
                "  source:\n    kind: sql\n    sqlite: db.sqlite\n"
                "    query: SELECT prompt, chosen, rejected FROM pairs\n",
            )
        ),
        host=HOST,
    ).to_json()["estimate"]
    assert est["tokens_per_sequence"] == 39  # mean 35 + 10 % = 38.5 -> 39
    assert "from 500 sampled rows" in est["tokens_per_sequence_source"]  # a bounded sample of the 600

    # A transcript preset: no guess, max_length, and the note says so.
    _write_pairs(tmp_path / "pairs.jsonl")
    text = _spec(tmp_path, "  source:\n    kind: files\n    paths: [pairs.jsonl]\n").read_text()
    (tmp_path / "hh.yaml").write_text(text.replace("preset: pairs", "preset: hh-rlhf"))
    est = compile_plan(load_spec(tmp_path / "hh.yaml"), host=HOST).to_json()["estimate"]
    assert est["tokens_per_sequence"] == 256
    assert "every sequence counted at max_length 256 (no length guess for preset hh-rlhf" in est["note"]
    # A hub source: no sample.
    est = compile_plan(load_spec(REPO / "specs" / "hh_bt.yaml"), host=HOST).to_json()["estimate"]
    assert est["note"].count("every sequence counted at max_length") == 1


def test_lora_and_checkpointing_change_the_flops():
    shape = shape_from_config(catalog_config("Qwen/Qwen2.5-7B")[1], "q")
    n = shape.non_embedding_parameters()
    full = flops_per_token(shape, seq_len=0, lora=False, checkpointing=False, lm_head=False)
    assert full == 6 * n
    assert flops_per_token(shape, seq_len=0, lora=True, checkpointing=False, lm_head=False) == 4 * n
    assert flops_per_token(shape, seq_len=0, lora=False, checkpointing=True, lm_head=False) == 8 * n


def test_load_plan_refuses_what_is_not_a_current_plan(tmp_path):
    bogus = tmp_path / "x.json"
    bogus.write_text("{}")
    with pytest.raises(PlanError, match="not an rmspec plan"):
        load_plan(bogus)
    with pytest.raises(PlanError, match="cannot read plan"):
        load_plan(tmp_path / "missing.json")
    plan = compile_plan(load_spec(REPO / "specs" / "hh_bt.yaml"), host=HOST).to_json()
    save_plan(dict(plan, schema_version=99), tmp_path / "old.json")
    with pytest.raises(PlanError, match="schema_version"):
        load_plan(tmp_path / "old.json")
    save_plan(dict(plan, spec_path=str(tmp_path / "gone.yaml")), tmp_path / "gone.json")
    with pytest.raises(PlanError, match="no longer exists"):
        load_plan(tmp_path / "gone.json")


def test_plan_is_pure():
    loaded = load_spec(REPO / "specs" / "ultrafeedback_bt.yaml")
    assert compile_plan(loaded, host=HOST).to_json() == compile_plan(loaded, host=HOST).to_json()


def test_counts_rows_of_a_saved_dataset_without_importing_datasets(tmp_path):
    import subprocess
    import sys

    make = (
        "import datasets\n"
        "d = datasets.Dataset.from_dict({'prompt': ['a'] * 10, 'chosen': ['b'] * 10, 'rejected': ['c'] * 10})\n"
        f"d.save_to_disk({str(tmp_path / 'single')!r})\n"
        f"datasets.DatasetDict({{'train': d, 'test': d.select(range(3))}}).save_to_disk({str(tmp_path / 'dict')!r})\n"
    )
    subprocess.run([sys.executable, "-c", make], check=True, capture_output=True, timeout=120)
    spec = load_spec(_spec(tmp_path, "  source:\n    kind: disk\n    path: single\n")).spec
    assert count_rows(spec.data.source, tmp_path)[0] == 10
    spec = load_spec(_spec(tmp_path, "  source:\n    kind: disk\n    path: dict\n    split: test\n")).spec
    assert count_rows(spec.data.source, tmp_path)[0] == 3
    spec = load_spec(_spec(tmp_path, "  source:\n    kind: disk\n    path: dict\n")).spec
    assert count_rows(spec.data.source, tmp_path)[0] == 10
