"""Process rewards (a token classifier read at every step's last token) split over 2 gloo ranks equal one process.

Under hardware.context_parallel each example becomes a packed row of one response (PackedStepCollator) whose read
points are its labelled tokens, several inside one response, read through the one split forward the other
approaches use (rmspec.train.context_parallel_run.split_head_outputs); one process keeps its padded batches
(StepCollator). Both parts hold the split to that padded one process, on a tiny Llama token classifier (2 layers,
hidden 32, fp32, 2 labels):

- The split forward itself (``step_logits`` with a context-parallel group, the trainer's path) on a packed batch
  against the padded forward of the same examples in one process: every rank's logits at the labelled tokens, the
  loss (every step, and each example's last only: train_on last_step) and the gradient of every parameter (the two
  ranks' summed), each within 1e-5. One example of 141 tokens fills its row alone (an odd width, padded to 4
  chunks) with its steps on both ranks; the others share a row; one has no labelled token.
- ``rmspec run`` with hardware.context_parallel: 2 on 2 processes (one group, gradient checkpointing on) against
  the same spec on one process (padded batches), 3 SGD steps of 4 examples (micro batch 2, accumulation 2),
  clipping out of reach: every step's loss within 1e-5, the gradient norms within 5e-5 relative, the final weights
  within 1e-5 and the final evaluation's step metrics. A sitecustomize on the children's PYTHONPATH (test only)
  records each split forward, so the test shows the run did split one example's steps over both ranks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from helpers.models import tiny_llama_config
from helpers.split_runs import (
    assert_evaluated_as_one,
    assert_gradients_equal,
    assert_split_equals_one,
    averaged_as_ddp,
    on_two_ranks,
    one_and_split,
    read_on_both_ranks,
    split_forwards,
)

VOCAB, PAD, TOL, IGNORE = 97, 0, 1e-5, -100

# ---------------------------------------------------------------- the split forward, 2 gloo ranks


def tiny():
    from transformers import AutoModelForTokenClassification

    # no dropout before the head (transformers' token classifiers default to 0.1; rmspec's loader turns it off)
    config = tiny_llama_config(
        vocab_size=VOCAB, max_position_embeddings=512, pad_token_id=PAD, num_labels=2, classifier_dropout=0.0
    )
    torch.manual_seed(0)
    return AutoModelForTokenClassification.from_config(config, attn_implementation="sdpa").train()


def examples() -> list[dict]:
    """Examples of 141, 57, 40, 23 and 9 tokens, each step's last token labelled 0 or 1 (-100 elsewhere): the long
    one's 6 steps spread over its row, one example with no labelled token; labels as long as the tokens or shorter."""
    g = torch.Generator().manual_seed(7)
    rows = []
    for n, steps in ((141, (20, 41, 70, 95, 118, 140)), (57, (30, 56)), (40, ()), (23, (5, 12, 22)), (9, (8,))):
        ids = torch.randint(1, VOCAB, (n,), generator=g).tolist()
        labels = [IGNORE] * n
        for j in steps:
            labels[j] = int(torch.randint(0, 2, (1,), generator=g))
        rows.append({"input_ids": ids, "labels": labels[: (max(steps) + 1) if steps else n]})
    return rows


def worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from rmspec.train.context_parallel import balanced_columns
    from rmspec.train.context_parallel_run import prepare_model
    from rmspec.train.process import (
        PackedStepCollator,
        StepCollator,
        last_point_only,
        last_step_only,
        step_logits,
        step_loss,
    )

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        batch = PackedStepCollator(PAD)(examples())
        model = tiny()
        groups = prepare_model(model, world)  # the trainer's path: check, register, the group
        logits, labels = step_logits(model, batch, groups)
        loss = step_loss(logits, labels)
        last = step_loss(logits, last_point_only(labels, batch["step_example"]))
        (loss + last).backward()
        every = [torch.empty_like(logits) for _ in range(world)]
        dist.all_gather(every, logits.detach())  # each rank's logits, compared below
        averaged_as_ddp(model)  # the group's shares, each sent back N times over, averaged: one process's
        if rank == 0:
            # one process as it trains a PRM: padded sequences, the head on every token, -100 off the steps
            padded = StepCollator(PAD)(examples())
            reference = tiny()
            want_logits, want_labels = step_logits(reference, padded)
            want_loss = step_loss(want_logits, want_labels)
            want_last = step_loss(want_logits, last_step_only(want_labels))
            (want_loss + want_last).backward()
            at_steps = want_logits.detach()[want_labels != IGNORE]  # example order, then position: the read points'
            grads = {
                name: (float((p.grad - q.grad).abs().max()), float(q.grad.abs().max()))
                for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters(), strict=True)
            }
            width = batch["input_ids"].shape[1]
            padded_width = width + (-width % (2 * world))
            owner = {c: r for r in range(world) for c in balanced_columns(padded_width, world, r).tolist()}
            holders = [owner[e % width] for e in batch["packed_ends"].tolist()]
            result = {
                "logits": [float((o - at_steps).abs().max()) for o in every],
                "logit_scale": float(at_steps.abs().max()),
                "labels_equal": bool(torch.equal(labels, want_labels[want_labels != IGNORE])),
                "loss": abs(loss.item() - want_loss.item()),
                "last": abs(last.item() - want_last.item()),
                "losses": [want_loss.item(), want_last.item()],
                "grads": grads,
                "width": width,
                "rows": int(batch["input_ids"].shape[0]),
                "steps": batch["step_count"].tolist(),
                "long_holders": sorted({h for h, k in zip(holders, batch["step_example"].tolist()) if k == 0}),
            }
            Path(out).write_text(json.dumps(result))
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    result = on_two_ranks(worker, tmp_path_factory.mktemp("cp-process"))
    print("split process forward: logits", result["logits"], "loss", result["loss"], "last", result["last"],
          "grads", max(d for d, _ in result["grads"].values()))  # fmt: skip
    return result


def test_the_batch_covers_what_it_claims(measured):
    assert measured["width"] == 141  # odd: padded to 4 chunks
    assert measured["rows"] == 2  # the short examples share a row
    assert measured["steps"] == [6, 2, 0, 3, 1]
    assert measured["long_holders"] == [0, 1]  # one response's steps read on both ranks


def test_split_steps_loss_and_gradients_equal_one_padded_process(measured):
    assert measured["labels_equal"] and measured["logit_scale"] > 0
    assert measured["losses"][0] != measured["losses"][1]  # last_step reads fewer steps: a loss of its own
    assert max(measured["logits"]) <= TOL, measured["logits"]  # every rank holds every step's logits
    assert measured["loss"] <= TOL and measured["last"] <= TOL
    assert_gradients_equal(measured["grads"], TOL)


# ---------------------------------------------------------------- rmspec run, 1 process against 2 split

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [steps.jsonl]}}
  mapping: {{preset: stepwise}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: process, step_separator: " w79"}}
"""  # then helpers.split_runs.RUN


def write_steps(path: Path, n: int = 40) -> None:
    """Stepwise rows in the tiny vocabulary: 3 or 4 steps of a few words after a short prompt, a wrong step
    carrying w40 (the PRM run of tests/test_prm_train.py, shorter)."""
    rng = random.Random(0)
    with path.open("w") as fh:
        for _ in range(n):
            k = rng.choice([3, 4])
            wrong = rng.randrange(k) if rng.random() < 0.5 else -1
            steps = [" ".join(["w12", "w40" if j == wrong else "w13"] + [f"w{rng.randint(14, 30)}"] * rng.randint(0, 3))
                     for j in range(k)]  # fmt: skip
            prompt = " ".join(f"w{rng.randint(1, 9)}" for _ in range(rng.randint(1, 4)))
            fh.write(
                json.dumps({"prompt": prompt, "completions": steps, "labels": [j != wrong for j in range(k)]}) + "\n"
            )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cp-process-run")
    write_steps(tmp / "steps.jsonl")
    return one_and_split(tmp, SPEC)


def test_a_process_run_split_over_two_processes_equals_one(runs):
    plan, status = assert_split_equals_one(runs, "process")
    assert plan["packing"] == "shared_prefix"  # packed because split
    assert json.loads((runs["one"] / "plan.json").read_text())["packing"] == "off"  # one process: padded, as before
    # The final evaluation split the validation rows too (one batch on each rank: the spy below), with the one
    # process's step metrics, as far as the weights are
    assert_evaluated_as_one(runs, status, {"eval/rm/loss", "eval/rm/step_accuracy", "eval/rm/first_error_accuracy"})


def test_the_run_split_one_response_s_steps_over_both_ranks(runs):
    """What the split forward saw (the spy): the 6 micro batches of the 3 steps, each rank the same rows, each step
    read on one rank, an example whose steps were read on both ranks, an odd width; the final evaluation split too."""
    assert read_on_both_ranks(split_forwards(runs)) > 0, "no example had steps read on both ranks"
