"""The GPU issue's measurements (issues/32), in its order. Each takes (work folder, device, budget,
tiny) and returns a Result; a case that does not fit in the budget is listed as not run, with the
flag that runs it in the next batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.gpu.harness import REPO, Budget, OutOfTime, Result, read_json, rmspec, run
from bench.gpu.models import build_model, write_pairs, write_spec

GIB = 1024**3
PEAK_SITE = Path(__file__).parent / "peak_site"


def memory_cases(tiny: bool) -> list[dict]:
    if tiny:
        return [
            dict(shape="tiny", max_length=64, packing="off"),
            dict(shape="tiny", max_length=64, packing="shared_prefix"),
        ]
    cases = []
    for shape in ("qwen2.5-0.5b", "qwen2.5-1.5b"):
        for length in (1024, 2048):
            cases += [
                dict(shape=shape, max_length=length, packing="off", checkpointing="off"),
                dict(shape=shape, max_length=length, packing="shared_prefix", checkpointing="off"),
                dict(shape=shape, max_length=length, packing="off", checkpointing="on"),
                dict(shape=shape, max_length=length, packing="off", checkpointing="off", lora=True),
            ]
        cases.append(dict(shape=shape, max_length=1024, packing="off", strategy="fsdp_full_shard_offload"))
    return cases


def case_name(case: dict) -> str:
    parts = [case["shape"], f"L{case['max_length']}", "packed" if case["packing"] != "off" else "unpacked"]
    parts += ["ckpt"] if case.get("checkpointing") == "on" else []
    parts += ["lora"] if case.get("lora") else []
    parts += [case["strategy"]] if case.get("strategy") else []
    return "-".join(parts).replace(".", "")


def memory(work: Path, device: dict, budget: Budget, tiny: bool, first_case: int = 0) -> Result:
    """Plan memory vs measured: the plan's predicted peak per device against torch's allocator peak."""
    result = Result(
        "memory",
        "Plan memory vs measured peak (Bradley-Terry, 3 steps)",
        header=["case", "strategy", "plan total GiB", "measured GiB", "measured / plan", "within 10%"],
    )
    measured = "torch.cuda.max_memory_allocated" if device["cuda"] else "peak RSS (CPU dry run: not comparable)"
    result.notes.append(f"Measured: {measured}, the maximum over ranks; plan: memory_per_device_gb.total.")
    cases = memory_cases(tiny)
    for index, case in enumerate(cases):
        if index < first_case:
            continue
        name = case_name(case)
        if not budget.allows(60 if not tiny else 20):
            result.skipped.append(f"{name}: out of this batch's time (next batch: --memory-from {index})")
            continue
        try:
            model = build_model(case["shape"], work / "models" / case["shape"])
            data = write_pairs(work / f"pairs-{case['max_length']}.jsonl", 64, case["max_length"])
            spec = write_spec(work, name, model, data, cuda=device["cuda"], **case)
            planned = run(rmspec("plan", str(spec), "--json"), budget)
            if planned.returncode != 0:
                result.rows.append([name, "-", "plan refused", "-", "-", planned.stdout[-200:] + planned.stderr[-200:]])
                continue
            plan = json.loads(planned.stdout)
            peaks = work / "peaks" / name
            env = {"RMSPEC_BENCH_PEAK": str(peaks), "PYTHONPATH": os.pathsep.join([str(PEAK_SITE), str(REPO)])}
            done = run(rmspec("run", str(spec)), budget, cwd=work, env=env)
        except OutOfTime:
            result.skipped.append(f"{name}: stopped at the batch's time limit (next batch: --memory-from {index})")
            continue
        if done.returncode != 0:
            result.rows.append([name, plan["strategy"], plan["memory_per_device_gb"]["total"], "run failed", "-", "-"])
            result.notes.append(f"{name} failed: {(done.stdout + done.stderr)[-600:]}")
            continue
        key = "cuda_allocated_peak_bytes" if device["cuda"] else "rss_peak_bytes"
        peak = max(read_json(p)[key] or 0 for p in peaks.glob("rank*.json")) / GIB
        total = float(plan["memory_per_device_gb"]["total"])
        ratio = peak / total if total else float("nan")
        result.rows.append(
            [name, plan["strategy"], f"{total:.2f}", f"{peak:.2f}", f"{ratio:.2f}", abs(ratio - 1) <= 0.1]
        )
    result.commands.append("python -m bench.gpu.run OUT --only memory [--memory-from N]")
    return result


def exactness(work: Path, device: dict, budget: Budget, tiny: bool) -> Result:
    """rmspec score against plain transformers on the same device; a SIGKILL + --resume against an
    uninterrupted run."""
    result = Result("exactness", "Exactness: scores and resume", header=["check", "max abs difference", "verdict"])
    shape, length = ("tiny", 64) if tiny else ("qwen2.5-0.5b", 512)
    try:
        model = build_model(shape, work / "models" / shape)
        data = write_pairs(work / f"pairs-{length}.jsonl", 64, length)
        case = dict(max_length=length, steps=6, save_steps=3, packing="off")
        ref = write_spec(work, "exact-ref", model, data, cuda=device["cuda"], **case)
        done = run(rmspec("run", str(ref)), budget, cwd=work)
        if done.returncode != 0:
            result.notes.append(f"reference run failed: {(done.stdout + done.stderr)[-600:]}")
            return result
        ref_model = work / "runs" / "exact-ref" / "model"
        scored = work / "exact-scored.jsonl"
        rows = work / "exact-rows.jsonl"
        pairs = [json.loads(line) for line in data.read_text().splitlines()[:32]]
        rows.write_text("".join(json.dumps({"prompt": p["prompt"], "response": p["chosen"]}) + "\n" for p in pairs))
        done = run(rmspec("score", str(ref_model), str(rows), "--out", str(scored), "--overwrite", "--json"), budget)
        if done.returncode != 0:
            result.notes.append(f"rmspec score failed: {(done.stdout + done.stderr)[-600:]}")
        else:
            diff = plain_transformers_difference(ref_model, rows, scored, device)
            result.rows.append(["rmspec score vs AutoModelForSequenceClassification", f"{diff:.3g}", diff <= 1e-2])
        result.rows.append(
            [
                "SIGKILL at step 4, --resume vs uninterrupted",
                *resume_difference(work, model, data, case, device, budget),
            ]
        )
    except OutOfTime as exc:
        result.skipped.append(f"stopped at the batch's time limit during {exc}")
    result.commands.append("python -m bench.gpu.run OUT --only exactness")
    result.notes.append("Scores: the model's dtype as saved, one device; tolerance 1e-2 (bf16 has 8 bits of mantissa).")
    return result


def plain_transformers_difference(model_dir: Path, rows: Path, scored: Path, device: dict) -> float:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    where = "cuda" if device["cuda"] else "cpu"
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).to(where).eval()
    texts = [json.loads(line) for line in rows.read_text().splitlines()]
    got = [json.loads(line) for line in scored.read_text().splitlines()]
    worst = 0.0
    for row, out in zip(texts, got, strict=True):
        batch = tok(row["prompt"] + " " + row["response"], return_tensors="pt").to(where)
        with torch.no_grad():
            want = model(**batch).logits[0, 0].float().item()
        worst = max(worst, abs(want - float(out.get("reward", out.get("score", float("nan"))))))
    return worst


def resume_difference(work: Path, model: Path, data: Path, case: dict, device: dict, budget: Budget) -> list:
    from safetensors.torch import load_file

    spec = write_spec(work, "exact-killed", model, data, cuda=device["cuda"], **case)
    run_dir = work / "runs" / "exact-killed"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        rmspec("run", str(spec)), cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while not (run_dir / "checkpoints" / "checkpoint-3" / "trainer_state.json").exists():
            if proc.poll() is not None or not budget.allows(30):
                raise OutOfTime("the run to kill")
            time.sleep(0.5)
        os.kill(read_json(run_dir / "status.json")["pid"], signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    done = run(rmspec("run", "--resume", str(run_dir)), budget, cwd=work)
    if done.returncode != 0:
        return ["resume failed", (done.stdout + done.stderr)[-200:]]
    want = load_file(work / "runs" / "exact-ref" / "model" / "model.safetensors")
    got = load_file(run_dir / "model" / "model.safetensors")
    worst = max(float((got[k].float() - v.float()).abs().max()) for k, v in want.items())
    return [f"{worst:.3g}", worst == 0.0]


def throughput(work: Path, device: dict, budget: Budget, tiny: bool) -> Result:
    """rmspec (packed, unpacked) against TRL's RewardTrainer: bench/train_decoder_vs_trl.py's table."""
    out = work / "throughput.md"
    steps = "1" if tiny else "30"
    argv = [sys.executable, str(REPO / "bench" / "train_decoder_vs_trl.py"), "--steps", steps, "--out", str(out)]
    return _wrapped("throughput", "Training throughput: rmspec vs TRL", argv, out, budget)


def serving(work: Path, device: dict, budget: Budget, tiny: bool) -> Result:
    """bench/serve_load.py: 64 concurrent single-sample /get_reward clients, rmspec serve vs the naive server."""
    duration = "3" if tiny else "60"
    argv = [
        sys.executable,
        str(REPO / "bench" / "serve_load.py"),
        "--duration",
        duration,
        "--clients",
        "64",
        "--threads",
        "0",
    ]
    return _wrapped("serving", "Serving under 64 concurrent clients", argv, None, budget)


def grpo(work: Path, device: dict, budget: Budget, tiny: bool) -> Result:
    """GRPO judge: time per step with use_vllm false, against the plan's estimate (specs/judge_grpo.yaml)."""
    result = Result("grpo", "GRPO judge: generation time per step", header=["what", "value"])
    spec = REPO / "specs" / "judge_grpo.yaml"
    if not spec.exists():
        result.skipped.append("the GRPO judge has not landed (no specs/judge_grpo.yaml)")
        return result
    try:
        planned = run(rmspec("plan", str(spec), "--json", "--set", "training.max_steps=2"), budget)
    except OutOfTime:
        result.skipped.append("out of this batch's time")
        return result
    if planned.returncode != 0:
        result.skipped.append(f"plan refused here: {(planned.stdout + planned.stderr).strip()[-400:]}")
        return result
    estimate = json.loads(planned.stdout).get("estimate", {})
    result.rows.append(["plan estimate (seconds per step)", estimate.get("seconds_per_step", "n/a")])
    if tiny:
        result.skipped.append("the GRPO run itself (needs the stage-1 judge run; GPU batches only)")
    else:
        result.skipped.append(
            "the GRPO run: run specs/judge_grpo_sft.yaml first, then `rmspec run specs/judge_grpo.yaml`"
        )
    return result


def _wrapped(name: str, title: str, argv: list[str], out: Path | None, budget: Budget) -> Result:
    result = Result(name, title, commands=[" ".join(argv)])
    try:
        done = run(argv, budget)
    except OutOfTime:
        result.skipped.append(f"{name}: stopped at the batch's time limit (run it alone: --only {name})")
        return result
    text = out.read_text() if out is not None and out.exists() else done.stdout
    result.notes.append(text.strip() or "(no output)")
    if done.returncode != 0:
        result.notes.append(f"exit {done.returncode}: {done.stderr[-800:]}")
    return result


ORDER = {"memory": memory, "throughput": throughput, "serving": serving, "exactness": exactness, "grpo": grpo}
