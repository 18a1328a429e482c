"""`rmspec run` with hardware.context_parallel: 2 on gloo processes equals the single-process run.

One process trains a tiny Llama (Bradley-Terry, prompt-once rows) for 3 steps of 4 pairs (micro batch 2,
accumulation 2); the same spec with 2 processes forming one context-parallel group (each row split over
both, accumulation 2 x 2 over 1 group: the same batches), with gradient checkpointing on (each layer's split
forward recomputed inside the backward), must log the same loss at every step and save the same weights,
within 1e-5 (SGD: see TRAINING). A third run, 4 processes in 2 groups of 2 (data x context:
each group a data-parallel replica drawing its own batches), is killed (SIGKILL) once its
first checkpoint is complete and resumed with `rmspec run --resume`: it ends equal too (micro batch 1,
accumulation 2 per group: each group's 2 rows of a step in two micro steps, so accumulation runs across groups). One run proves both
the two-group layout and the resume, to keep the module's time down (the runs are built once for the module:
4 runs, ~3 min; 4 processes on 2 cores is slow but exact).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.context_parallel import assert_pairs_evaluated_as_one_process
from helpers.models import build_model
from helpers.polling import kill_trainer_at_checkpoint
from helpers.runs import make_run_spec, metrics_rows, rmspec

# SGD: its step is the gradient times the rate, so equal gradients give weights equal to float noise. AdamW
# divides by sqrt(v): an element whose gradient is ~0 steps +-rate whichever way 1e-7 of summation noise tips
# it (measured: losses and gradient norms equal within 2e-6 relative, one weight of 2,048 off by 5.8e-5).
# Clipping off in effect (norms here are 4-9): clipping to 1 would rescale a gradient off by a constant factor
# (a group's gradients averaged instead of summed) back to the same step, and hide it.
TRAINING = (
    "  max_steps: 3\n  micro_batch_size: 2\n  save_steps: 1\n  save_total_limit: 5\n  optimizer: sgd\n"
    "  max_grad_norm: 1000.0"
)


def _spec(tmp: Path, name: str, procs: int, model: Path, degree: int = 1, checkpointing: str = "off") -> Path:
    training = f"{TRAINING}\n  gradient_checkpointing: {checkpointing}"
    spec = make_run_spec(tmp, name=name, training=training, batch=4, procs=procs, rows=60, model=model)
    text = spec.read_text().replace("logging_steps: 2", "logging_steps: 1")  # a loss for every step
    text = text.replace("learning_rate: 3.0e-3", "learning_rate: 0.1")
    if degree > 1:
        text = text.replace(f"gpus_per_node: {procs}}}", f"gpus_per_node: {procs}, context_parallel: {degree}}}")
    if procs // degree > 1:
        # 2 groups of 2 take 2 rows each per step: micro batch 1 accumulates them in two micro steps
        text = text.replace("micro_batch_size: 2", "micro_batch_size: 1")
    spec.write_text(text)
    return spec


def _run(spec: Path, cwd: Path, *extra: str) -> None:
    done = rmspec("run", *extra, str(spec), cwd=cwd, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cp-run")
    model = build_model("llama", tmp / "model-src")
    one, cp = _spec(tmp, "one", 1, model), _spec(tmp, "cp", 2, model, 2, checkpointing="on")
    killed = _spec(tmp, "killed", 4, model, 2)
    _run(one, tmp)
    _run(cp, tmp)
    root = tmp / "runs"
    kill_trainer_at_checkpoint(killed, tmp, root / "killed", 1)  # rank 0's trainer
    killed_status = json.loads((root / "killed" / "status.json").read_text())
    killed_model = (root / "killed" / "model").exists()
    _run(root / "killed", tmp, "--resume")
    return {"one": root / "one", "cp": root / "cp", "killed": root / "killed", "was_killed": not killed_model
            and killed_status["state"] != "completed"}  # fmt: skip


def _losses(run: Path) -> dict[int, tuple[float, float]]:
    """(loss, gradient norm before clipping) by step."""
    rows = [r for r in metrics_rows(run) if "train/rm/loss" in r]
    steps = [r["step"] for r in rows]
    assert len(set(steps)) == len(steps), f"a step logged twice in {run}: {steps}"
    return {r["step"]: (r["train/rm/loss"], r["grad_norm"]) for r in rows}


def _weights(run: Path) -> dict:
    from safetensors.torch import load_file

    folder = run / "model" if (run / "model").exists() else run  # a run, or one of its checkpoints
    return load_file(str(folder / "model.safetensors"))


def _assert_same_training(run: Path, reference: Path) -> None:
    want, got = _losses(reference), _losses(run)
    assert sorted(got) == sorted(want) == [1, 2, 3]
    for step, (loss, norm) in want.items():
        assert got[step][0] == pytest.approx(loss, rel=1e-5, abs=1e-6), step
        # the group's gradients summed, not averaged (a factor 2 off); measured 4e-6 apart, float summation order
        assert got[step][1] == pytest.approx(norm, rel=5e-5), step
    a, b = _weights(reference), _weights(run)
    assert sorted(a) == sorted(b)
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    # steps 2 and 3 moved the weights: equal weights mean equal training, not none
    first = _weights(reference / "checkpoints" / "checkpoint-1")
    moved = max((a[k].float() - first[k].float()).abs().max().item() for k in a)
    print(f"{run.name}: largest weight difference {worst:.2e}; weights moved up to {moved:.2e} after step 1")
    assert worst <= 1e-5 < moved


def test_two_processes_splitting_each_row_train_as_one(runs):
    _assert_same_training(runs["cp"], runs["one"])
    plan = json.loads((runs["cp"] / "plan.json").read_text())
    status = json.loads((runs["cp"] / "status.json").read_text())
    # one group of 2 processes takes 4 pairs per step: micro 2 x accumulation 2, as the single process
    assert plan["context_parallel"]["degree"] == 2 and plan["context_parallel"]["run_refused"] is None
    assert plan["gradient_checkpointing"] is True  # recomputed in the backward, attending split there too
    assert (status["world_size"], status["global_batch_size"]) == (2, 4)
    assert (status["micro_batch_size"], status["gradient_accumulation_steps"]) == (2, 2)
    # figures summed over processes count the group once; rank 0 alone wrote metrics.jsonl
    one_rows = {r["step"]: r for r in metrics_rows(runs["one"]) if "train/rm/loss" in r}
    for row in (r for r in metrics_rows(runs["cp"]) if "train/rm/loss" in r):
        assert (row["num_tokens"], row["episode"]) == (one_rows[row["step"]]["num_tokens"], row["step"] * 4)
    assert sum(r.get("event") == "train_begin" for r in metrics_rows(runs["cp"])) == 1
    # the final evaluation split over the group: the one process's figures as far as 3 steps at rate 0.1 keep the
    # weights (rewards 2e-5 relative apart), its own saved model's one-process scoring to 1e-6 (measured 1.1e-7)
    assert_pairs_evaluated_as_one_process(runs["cp"], runs["one"], rel=1e-4)


def test_two_groups_killed_after_a_checkpoint_resume_equal(runs):
    """4 processes, 2 groups of 2: each step the two groups take 2 pairs each (micro 1, accumulation 2), the
    4 pairs of the single process's two micro batches of 2; killed at step 1 and resumed, the whole run equals
    the one process's."""
    assert runs["was_killed"], "the run finished before the kill: nothing was resumed"
    status = json.loads((runs["killed"] / "status.json").read_text())
    assert status["state"] == "completed" and status["resumed"] is True
    assert Path(status["resumed_from"]).name == "checkpoint-1"
    assert (status["world_size"], status["global_batch_size"]) == (4, 4)
    assert (status["micro_batch_size"], status["gradient_accumulation_steps"]) == (1, 2)
    _assert_same_training(runs["killed"], runs["one"])
    # its final evaluation is split over the 2 groups too: 12 validation pairs, one batch of 16 per group (group
    # 0's filled with 4 repeats, group 1's all repeats), each pair counted once (tests/test_context_parallel_eval.py)
    assert_pairs_evaluated_as_one_process(runs["killed"], runs["one"], rel=1e-4)


def test_the_sharder_deals_each_batch_to_every_rank_of_one_group():
    """4 processes in 2 groups of 2 (the killed run above trains so): ranks 0 and 1 draw the same batches,
    ranks 2 and 3 the same others, and the groups together draw the sampler's batches once, as 2 processes
    would."""
    from accelerate.data_loader import BatchSamplerShard
    from torch.utils.data import BatchSampler

    from rmspec.train.context_parallel_run import Groups, layout, shard_over_groups

    assert layout(4, 2) == [[0, 1], [2, 3]] and layout(2, 2) == [[0, 1]]
    with pytest.raises(ValueError, match="does not divide the 4 processes"):
        layout(4, 3)
    batches = list(BatchSampler(range(18), 2, drop_last=False))

    def drawn(rank: int) -> list[list[int]]:
        loader = type("Loader", (), {})()
        loader.batch_sampler = BatchSamplerShard(BatchSampler(range(18), 2, False), num_processes=4, process_index=rank)
        return list(shard_over_groups(loader, Groups(degree=2, count=2, index=rank // 2, group=None)).batch_sampler)

    two_processes = [list(BatchSamplerShard(BatchSampler(range(18), 2, False), 2, r)) for r in range(2)]
    assert drawn(0) == drawn(1) == two_processes[0] and drawn(2) == drawn(3) == two_processes[1]
    assert {tuple(b) for b in drawn(0) + drawn(2)} == {tuple(b) for b in batches}


def test_the_split_outputs_keep_their_value_and_send_their_gradient_back_n_fold():
    """Only what passes through the split forward is scaled: a parameter the loss reads directly (a learned tie's
    log nu, ODIN's head weights in its orthogonality term) has its whole gradient on every rank already."""
    import torch

    from rmspec.train.context_parallel_run import sum_over_group

    w = torch.tensor([0.5, -1.0], requires_grad=True)  # stands for the weights the split forward reads
    v = torch.tensor(2.0, requires_grad=True)  # a parameter the loss reads directly
    outputs = sum_over_group(w**2, 3)
    assert torch.equal(outputs, (w**2).detach())
    loss = (outputs * v).sum() + v**2
    loss.backward()
    assert loss.item() == pytest.approx(1.25 * 2 + 4)
    assert torch.allclose(w.grad, 3 * 2 * w.detach() * 2.0)
    assert v.grad.item() == pytest.approx(1.25 + 4)  # once: not the group's to add up
