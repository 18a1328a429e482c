"""`rmspec export --to vllm --check` without the engine: the held-out rows it sends (read from the
split folder a run's data stage writes), the precision it chooses, the tolerance rule and verdict, and
its refusals. The engine itself: tests/test_export_vllm.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from helpers.ci import need

datasets = need("datasets")

from rmspec.errors import RmspecError  # noqa: E402
from rmspec.export.check_dtype import (  # noqa: E402
    BF16_RELATIVE,
    TOLERANCE_FP32,
    bf16_refusal,
    choose,
    cpu_flags,
    engine_device,
    tolerance,
)
from rmspec.export.check_rows import BUILT_IN, check_rows, read_rows_file, spread  # noqa: E402
from rmspec.export.vllm_check import verdict  # noqa: E402

FINGERPRINT = "0123abcd"


def fake_run(root: Path, pairs: list[dict], fingerprint: str = FINGERPRINT, validation: bool = True) -> Path:
    """A run directory as `rmspec run` leaves it, as far as the check reads it: spec.yaml, data_report.json
    (the fingerprint) and RUN/cache/<fingerprint>/{train,validation} (datasets save_to_disk folders)."""
    run = root / "run"
    run.mkdir()
    (run / "spec.yaml").write_text("version: 1\n")
    (run / "data_report.json").write_text(json.dumps({"fingerprint": fingerprint}))
    cache = run / "cache" / fingerprint
    datasets.Dataset.from_list(pairs[:1]).save_to_disk(str(cache / "train"))
    if validation:
        datasets.Dataset.from_list(pairs).save_to_disk(str(cache / "validation"))
    return run


def pair(i: int, turns: int = 1) -> dict:
    messages = [{"role": "user", "content": f"question {i}"}]
    if turns > 1:
        messages = [{"role": "system", "content": "Be brief."}, *messages]
    return {
        "id": f"p{i}",
        "prompt": f"<rendered {i}>",  # the rendered prompt the split keeps beside the conversation
        "prompt_messages": messages,
        "chosen": f"good answer {i}",
        "rejected": f"bad answer {i}",
        "chosen_input_ids": [1, 2, i],
    }


# ---------------------------------------------------------------------- the run's held-out rows


def test_the_default_rows_are_both_responses_of_pairs_spread_over_the_validation_split(tmp_path):
    pairs = [pair(i, turns=2 if i % 3 == 1 else 1) for i in range(40)]
    run = fake_run(tmp_path, pairs)
    chosen = check_rows(run, None, limit=10)
    split = list(datasets.load_from_disk(str(run / "cache" / FINGERPRINT / "validation")))
    picked = [split[i] for i in (0, 8, 16, 24, 32)]  # 5 pairs, every 40 // 5-th
    assert [(r.id, r.side) for r in chosen.rows] == [(p["id"], s) for p in picked for s in ("chosen", "rejected")]
    assert [r.response for r in chosen.rows] == [p[s] for p in picked for s in ("chosen", "rejected")]
    assert [r.messages for r in chosen.rows] == [p["prompt_messages"] for p in picked for _ in range(2)]
    # every other pair with a single user turn goes to rmspec score as a text prompt; multi-turn never
    text = {r.id for r in chosen.rows if r.text_prompt}
    assert text == {p["id"] for n, p in enumerate(picked) if n % 2 == 0 and len(p["prompt_messages"]) == 1}
    assert chosen.rows[0].score_row() == {"prompt": "question 0", "response": "good answer 0"}
    assert chosen.rows[2].score_row()["prompt"] == [{"role": "user", "content": "question 8"}]
    report = chosen.report()
    assert report["rows"] == 10 and report["text_prompts"] + report["message_prompts"] == 10
    assert report["text_prompts"] > 0 and report["message_prompts"] > 0
    assert str(run / "cache" / FINGERPRINT / "validation") in report["rows_source"]
    assert report["rows_used"][1] == {"id": "p0", "side": "rejected", "prompt": "text"}
    assert check_rows(run, None, limit=10) == chosen  # deterministic


def test_a_small_split_gives_all_its_rows_and_an_odd_limit_cuts_the_last_pair(tmp_path):
    run = fake_run(tmp_path, [pair(i) for i in range(3)])
    assert [(r.id, r.side) for r in check_rows(run, None, limit=32).rows] == [
        (f"p{i}", s) for i in range(3) for s in ("chosen", "rejected")
    ]
    assert [(r.id, r.side) for r in check_rows(run, None, limit=3).rows] == [
        ("p0", "chosen"),
        ("p0", "rejected"),
        ("p1", "chosen"),
    ]


def test_spread_is_even_and_in_order():
    assert spread(10, 20) == list(range(10))
    assert spread(10, 5) == [0, 2, 4, 6, 8]
    assert spread(7, 3) == [0, 2, 4]


def test_rows_with_images_are_left_out(tmp_path):
    pairs = [{**pair(i), "images": ["img.png"] if i == 0 else []} for i in range(3)]
    run = fake_run(tmp_path, pairs)
    assert {r.id for r in check_rows(run, None).rows} == {"p1", "p2"}


@pytest.mark.parametrize(
    "case, expected",
    [
        ("no validation split", "no validation split"),
        ("cache removed", "data cache was removed"),
        ("not cached", "not cached"),
    ],
)
def test_a_run_without_its_held_out_split_is_refused_naming_check_rows(tmp_path, case, expected):
    run = fake_run(
        tmp_path,
        [pair(0)],
        fingerprint="" if case == "not cached" else FINGERPRINT,
        validation=case != "no validation split",
    )
    if case == "cache removed":
        import shutil

        shutil.rmtree(run / "cache")
    with pytest.raises(RmspecError) as err:
        check_rows(run, None)
    assert expected in err.value.message and "--check-rows" in err.value.hint


def test_check_rows_file_and_bare_model_folder(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"prompt": "hi", "response": "hello"})
        + "\n\n"
        + json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})
        + "\n"
    )
    chosen = check_rows(tmp_path / "anything", rows, limit=32)
    assert [(r.messages, r.response, r.text_prompt) for r in chosen.rows] == [
        ([{"role": "user", "content": "hi"}], "hello", True),
        ([{"role": "user", "content": "a"}], "b", False),
    ]
    assert str(rows) in chosen.source
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "a"}]}) + "\n")
    with pytest.raises(RmspecError) as err:
        read_rows_file(bad)
    assert f"{bad}:1" in err.value.message
    model = tmp_path / "model"
    model.mkdir()
    built_in = check_rows(model, None)
    assert len(built_in.rows) == len(BUILT_IN) and "built-in" in built_in.source and "not a run" in built_in.source
    with pytest.raises(RmspecError):
        check_rows(model, None, limit=0)


# ---------------------------------------------------------------------- precision and tolerance


def test_the_tolerance_rules_by_hand_numbers():
    fp32 = tolerance("float32")
    assert not fp32.relative and fp32.bound([-90.0, 3.0]) == TOLERANCE_FP32 == 1e-4
    bf16 = tolerance("bfloat16")
    assert bf16.relative and bf16.bound([-90.0, 3.0]) == pytest.approx(BF16_RELATIVE * 90.0)
    assert bf16.bound([0.2, -0.5]) == pytest.approx(BF16_RELATIVE)  # scale at least 1
    assert f"{BF16_RELATIVE:g} x max(1, max |rmspec score|)" in bf16.rule and "0.0001" in fp32.rule


def test_the_verdict_uses_the_bound_of_its_rows_and_never_counts_the_trap():
    expected = [1.0, -2.0, 0.5]
    ok = verdict(
        expected,
        {"classify messages": [1.00002, -2.0, 0.5], "naive: text with BOS": [0.4, -2.0, 0.5]},
        tolerance("float32"),
    )
    assert ok["passed"] and ok["max_abs_diff"] == pytest.approx(2e-5) and ok["dtype"] == "float32"
    assert ok["not_supported_forms"] == {"naive: text with BOS": pytest.approx(0.6)}
    bad = verdict(
        expected,
        {"classify messages": [1.0, -2.0, 0.5], "pooling verl text": [1.0, -2.0003, 0.5]},
        tolerance("float32"),
    )
    assert not bad["passed"] and bad["max_abs_diff"] == pytest.approx(3e-4)
    # bfloat16: 0.15 x max(1, 2.0) = 0.3 allowed
    assert BF16_RELATIVE == 0.15
    bf = verdict(expected, {"classify messages": [1.29, -2.0, 0.5]}, tolerance("bfloat16"))
    assert bf["passed"] and bf["allowed_difference"] == pytest.approx(0.3) and bf["reward_scale"] == 2.0
    assert not verdict(expected, {"classify messages": [1.31, -2.0, 0.5]}, tolerance("bfloat16"))["passed"]
    with pytest.raises(ValueError):  # a row vLLM did not answer is not a pass
        verdict(expected, {"classify messages": [1.0, -2.0]}, tolerance("float32"))


def test_pairs_kept_in_order_are_counted_in_the_worst_form(tmp_path):
    from rmspec.export.check_rows import CheckRow

    rows = [CheckRow([], "a", id="p0", side="chosen"), CheckRow([], "b", id="p0", side="rejected")]
    rows += [CheckRow([], "c", id="p1", side="chosen"), CheckRow([], "d", id="p1", side="rejected")]
    expected = [1.0, 0.0, 0.3, 0.2]
    got = {"classify messages": [1.0, 0.0, 0.3, 0.2], "pooling verl text": [1.0, 0.0, 0.19, 0.2]}
    report = verdict(expected, got, tolerance("bfloat16"), rows)
    assert report["pairs_same_order"] == {"pairs": 2, "same_order": 1, "share": 0.5}
    assert "pairs_same_order" not in verdict(expected, got, tolerance("bfloat16"), rows[:1])


def test_auto_is_bfloat16_on_a_gpu_engine_and_float32_on_a_cpu_one():
    assert choose("auto", "cuda", None)[0] == "bfloat16"
    dtype, why = choose("auto", "cpu", frozenset())
    assert dtype == "float32" and "no GPU" in why
    assert choose("float32", "cuda", None)[0] == "float32"
    assert choose("bfloat16", "cpu", frozenset({"avx512_bf16"})) == ("bfloat16", "--dtype bfloat16")


def test_bfloat16_on_a_cpu_without_native_bfloat16_is_refused():
    flags = frozenset({"avx2", "avx512f"})
    refused = bf16_refusal(flags)
    assert refused is not None and "avx512_bf16" in refused.message and "--dtype float32" in refused.hint
    with pytest.raises(RmspecError):
        choose("bfloat16", "cpu", flags)
    assert choose("bfloat16", "cuda", flags)[0] == "bfloat16"  # a GPU engine does not need the CPU's
    assert bf16_refusal(frozenset({"amx_bf16"})) is None and bf16_refusal(None) is None


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(info) == frozenset({"fpu", "avx2", "avx512_bf16"})
    assert cpu_flags(tmp_path / "missing") is None


def test_the_engine_device_probe(tmp_path):
    cpu = tmp_path / "cpu-python"
    cpu.write_text("#!/bin/sh\necho cpu\n")
    cpu.chmod(0o755)
    assert engine_device(str(cpu)) == "cpu"
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(RmspecError) as err:
        engine_device(str(broken))
    assert "is broken" in err.value.message and "No module named torch" in err.value.message


def test_check_options_are_for_vllm_only(tmp_path):
    import subprocess
    import sys

    for extra in (["--dtype", "bfloat16"], ["--check-limit", "4"]):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rmspec",
                "export",
                str(tmp_path),
                "--to",
                "verl",
                "-o",
                str(tmp_path / "x.py"),
                *extra,
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2 and "for --to vllm" in done.stderr and "Traceback" not in done.stderr


def test_check_rows_with_pictures_read_each_line_or_say_which_one_is_wrong(tmp_path):
    """--check-rows for a vision-language export: a picture path becomes a data URI of its bytes, a data URI
    stays as it is; a line without a response, or naming a missing picture, stops at that file and line."""
    from rmspec.export.check_image_rows import read_image_rows

    (tmp_path / "red.png").write_bytes(b"\x89PNG\r\n\x1a\nred")
    good = tmp_path / "rows.jsonl"
    good.write_text(
        json.dumps({"prompt": "what colour?", "response": "red", "images": "red.png"})
        + "\n\n"
        + json.dumps({"id": "b", "prompt": "and this?", "response": "blue", "images": ["data:image/png;base64,AA=="]})
        + "\n"
    )
    first, second = read_image_rows(good)
    assert first.images == ("data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nred").decode(),)
    assert (first.id, first.response, second.id, second.images) == ("1", "red", "b", ("data:image/png;base64,AA==",))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "response": "r"}) + "\n" + json.dumps({"prompt": "p"}) + "\n")
    with pytest.raises(RmspecError, match=r"bad.jsonl:2: not a check row"):
        read_image_rows(bad)
    missing_picture = tmp_path / "missing.jsonl"
    missing_picture.write_text(json.dumps({"prompt": "p", "response": "r", "images": ["nope.png"]}) + "\n")
    with pytest.raises(RmspecError, match="nope.png: no such file"):
        read_image_rows(missing_picture)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(RmspecError, match="empty.jsonl: no rows"):
        read_image_rows(tmp_path / "empty.jsonl")
