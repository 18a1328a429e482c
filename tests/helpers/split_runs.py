"""A context-parallel `rmspec run` against the one-process run of the same spec (tests/test_context_parallel_*.py
for listwise, pointwise and process rewards): both trained once per module with a spy in the processes, and the
checks every approach that trains split must pass (tests/test_context_parallel_run.py holds Bradley-Terry's)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.models import build_model
from helpers.runs import metrics_rows, rmspec

# TEST ONLY, on the children's PYTHONPATH (one_and_split): in rmspec's training processes, record every split
# forward: its width, whether it trains, each read point's group (a pair, list or example) and whether this rank
# holds it, and the groups this rank holds any token of; one JSON line per call and rank.
SPY = """
import os, sys
if "rmspec.launch.entrypoint" in sys.orig_argv and os.environ.get("RMSPEC_TEST_CP_SPY"):
    import json
    import torch
    import torch.distributed as dist
    from rmspec.train import context_parallel as cp

    whole = cp.head_outputs

    def head_outputs(model, rows, group=None, states=None):
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        padded = cp.pad_columns(rows, 2 * size)
        mine = cp.balanced_columns(padded.input_ids.shape[1], size, rank)
        ends = (padded.ends % padded.input_ids.shape[1]).tolist()
        groups = rows.group.reshape(-1)[rows.ends].tolist()
        record = {
            "width": rows.input_ids.shape[1],
            "training": torch.is_grad_enabled(),
            "read": [[g, e in set(mine.tolist())] for g, e in zip(groups, ends)],
            "touched": sorted(set(padded.group[:, mine].reshape(-1).tolist())),
        }
        with open(os.path.join(os.environ["RMSPEC_TEST_CP_SPY"], f"rank{rank}.jsonl"), "a") as fh:
            fh.write(json.dumps(record) + "\\n")
        return whole(model, rows, group, states)

    cp.head_outputs = head_outputs
"""


# The spec head of a Bradley-Terry run on helpers.runs.write_pairs' pairs.jsonl, its approach's options formatted
# in (``options``: "sft_weight: 0.5", "ensemble: {members: 3}"); one_and_split adds RUN.
PAIRS_HEAD = """version: 1
name: {name}
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [pairs.jsonl]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: bradley_terry, {options}}}
"""


# What follows each module's spec head (its data and approach): 3 SGD steps of 4 examples (micro batch 2,
# accumulation 2), clipping out of reach, fields formatted by one_and_split.
RUN = """training:
  learning_rate: {learning_rate}
  global_batch_size: 4
  micro_batch_size: 2
  max_length: 64
  max_steps: 3
  logging_steps: 1
  save_steps: 3
  optimizer: sgd
  max_grad_norm: 1000.0
  gradient_checkpointing: {checkpointing}
  seed: 7
hardware: {{device: cpu, gpus_per_node: {procs}{cp}}}
eval: {{validation: true, benchmarks: []}}
output: {{dir: {out}}}
"""


def one_and_split(
    tmp: Path, head: str, causal: bool = False, learning_rate: float = 0.01, **fields: object
) -> dict[str, Path]:
    """`rmspec run` of the spec ``head`` + RUN (its data and approach, then the common training; formatted with
    name, model, procs, cp, out, checkpointing, learning_rate and ``fields``) as "one" on one process and as "cp" on 2 processes with hardware.context_parallel: 2, on a tiny
    Llama (a causal LM where ``causal``: a judge), with the SPY as the processes' sitecustomize.py: the runs, the
    spy's folder and the model. The split
    run recomputes each layer's split forward in the backward (gradient checkpointing on); the one process runs
    without."""
    model = build_model("llama", tmp / "model-src", causal=causal)
    site, spied = tmp / "site", tmp / "spied"
    site.mkdir()
    spied.mkdir()
    (site / "sitecustomize.py").write_text(SPY)
    specs = []
    for name, procs, cp, checkpointing in (("one", 1, "", '"off"'), ("cp", 2, ", context_parallel: 2", '"on"')):
        out = tmp / "runs" / name
        text = (head + RUN).format(
            name=name,
            model=model,
            procs=procs,
            cp=cp,
            out=out,
            checkpointing=checkpointing,
            learning_rate=learning_rate,
            **fields,
        )
        specs.append(tmp / f"{name}.yaml")
        specs[-1].write_text(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
        mp.setenv("RMSPEC_TEST_CP_SPY", str(spied))
        for spec in specs:
            done = rmspec("run", str(spec), cwd=tmp, timeout=600)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {"one": tmp / "runs" / "one", "cp": tmp / "runs" / "cp", "spied": spied, "model": model}


def on_two_ranks(worker: Callable[[int, int, int, str], None], folder: Path) -> dict:
    """``worker(rank, world, port, out)`` on 2 spawned gloo processes; the JSON rank 0 wrote to ``out``."""
    import torch.multiprocessing as mp

    from helpers.serve_process import free_port

    out = folder / "results.json"
    mp.start_processes(worker, args=(2, free_port(), str(out)), nprocs=2, start_method="spawn", join=True)
    return json.loads(out.read_text())


def tiny_scorer(labels: int, vocab: int, pad: int):
    """A tiny Llama sequence classifier (2 layers, hidden 32, fp32, SDPA) with ``labels`` outputs, in training mode
    and seeded: every rank and the one-process reference build the same weights."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from helpers.models import tiny_llama_config

    config = tiny_llama_config(vocab_size=vocab, max_position_embeddings=512, pad_token_id=pad, num_labels=labels)
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa").train()


def column_owners(width: int, world: int) -> dict[int, int]:
    """The rank that holds each column of a packed batch ``width`` wide split over ``world`` ranks (padded to 2 x
    world chunks, two a rank: rmspec.train.context_parallel.balanced_columns)."""
    from rmspec.train.context_parallel import balanced_columns

    padded = width + (-width % (2 * world))
    return {c: r for r in range(world) for c in balanced_columns(padded, world, r).tolist()}


def averaged_as_ddp(model) -> None:
    """Every parameter's gradient averaged over the processes, as DDP does after the backward: the split forward
    sends its outputs' gradient back N times over (rmspec.train.context_parallel_run.sum_over_group), so the
    mean of the group's shares is one process's gradient."""
    import torch.distributed as dist

    world = dist.get_world_size()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def assert_gradients_equal(grads: dict[str, list[float]], tol: float = 1e-5) -> None:
    """Every parameter's gradient (name -> [largest difference from one process, largest one-process value]) reached
    in one process and equal within ``tol`` split."""
    assert grads, "no parameter compared"
    for name, (diff, scale) in grads.items():
        assert scale > 0, f"{name}: no gradient reached it in one process"
        assert diff <= tol, f"{name} gradient differs by {diff} (largest {scale})"


def losses(run: Path, family: str = "rm") -> dict[int, tuple[float, float]]:
    """(loss, gradient norm) by step, each step logged once; ``family``: the metrics' (rm, or sft for a judge)."""
    rows = [r for r in metrics_rows(run) if f"train/{family}/loss" in r]
    steps = [r["step"] for r in rows]
    assert len(set(steps)) == len(steps), f"a step logged twice in {run}: {steps}"
    return {r["step"]: (r[f"train/{family}/loss"], r["grad_norm"]) for r in rows}


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def assert_split_equals_one(runs: dict[str, Path], what: str, family: str = "rm") -> tuple[dict, dict]:
    """The split run trained as the one process did (3 steps: losses 1e-5, gradient norms 5e-5 relative, weights
    1e-5 while they moved further), under a plan that splits it over 2 ranks with the backward recomputing the
    split forward; returns (the split run's plan, its status)."""
    want, got = losses(runs["one"], family), losses(runs["cp"], family)
    assert sorted(got) == sorted(want) == [1, 2, 3]
    for step, (loss, norm) in want.items():
        assert got[step][0] == pytest.approx(loss, abs=1e-5), step
        # the group's gradients summed, not averaged (a factor 2 off)
        assert got[step][1] == pytest.approx(norm, rel=5e-5), step
    a, b = weights(runs["one"] / "model"), weights(runs["cp"] / "model")
    assert sorted(a) == sorted(b)
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    start = weights(runs["model"])  # the backbone before training: equal weights mean equal training, not none
    same = {k: k if k in start else k.removeprefix("model.") for k in a}
    moved = max((a[k].float() - start[s].float()).abs().max().item() for k, s in same.items() if s in start)
    print(f"{what} split: losses {got}, against {want}; largest weight difference {worst:.2e}, moved {moved:.2e}")
    assert worst <= 1e-5 < moved
    plan = json.loads((runs["cp"] / "plan.json").read_text())
    assert plan["context_parallel"]["degree"] == 2 and plan["context_parallel"]["run_refused"] is None
    assert plan["gradient_checkpointing"] is True  # recomputed in the backward, attending split there too
    status = json.loads((runs["cp"] / "status.json").read_text())
    assert (status["world_size"], status["global_batch_size"], status["state"]) == (2, 4, "completed")
    return plan, status


def assert_evaluated_as_one(runs: dict[str, Path], status: dict, expected: set[str], rel: float = 1e-4) -> None:
    """The split run's final evaluation figures (``expected`` among them) are the one process's, as far as the
    weights are."""
    single = json.loads((runs["one"] / "status.json").read_text())["metrics"]
    figures = [k for k in single if k.startswith("eval/") and not k.endswith(("runtime", "per_second"))]
    assert expected <= set(figures)
    for key in figures:  # nan where a figure has no rows (an ensemble's disagreement on misranked pairs, none)
        assert status["metrics"][key] == pytest.approx(single[key], rel=rel, abs=1e-6, nan_ok=True), key


def split_forwards(runs: dict[str, Path], micro_batches: int = 6) -> list[tuple[dict, dict]]:
    """The spy's records of the training run's split forwards, rank 0's beside rank 1's, once they show what every
    split run must: ``micro_batches`` forwards on each rank and one more for the validation's batch (evaluated
    split, no gradient), the same rows on both ranks (widths, read points' groups), an odd width among them, and
    each read point held by exactly one rank."""
    spied = {
        r: [json.loads(line) for line in (runs["spied"] / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)
    }
    calls = {r: [c for c in spied[r] if c["training"]] for r in spied}
    assert len(calls[0]) == len(calls[1]) == micro_batches
    assert [len(spied[r]) - micro_batches for r in spied] == [1, 1]  # the validation's one batch, evaluated split
    assert [c["width"] for c in calls[0]] == [c["width"] for c in calls[1]]
    assert any(c["width"] % 2 for c in calls[0]), "no odd width"
    for c0, c1 in zip(calls[0], calls[1], strict=True):
        assert [g for g, _ in c0["read"]] == [g for g, _ in c1["read"]]
        assert all(a != b for (_, a), (_, b) in zip(c0["read"], c1["read"], strict=True))  # one holder each
    return list(zip(calls[0], calls[1]))


def read_on_both_ranks(forwards: list[tuple[dict, dict]]) -> int:
    """How many groups (a list's responses, a response's steps) had read points on both ranks."""
    both = 0
    for c0, _ in forwards:
        groups = {g for g, _ in c0["read"]}
        both += sum(len({held for g, held in c0["read"] if g == k}) == 2 for k in groups)
    return both
