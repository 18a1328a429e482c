"""Pointwise (scores per attribute, regression) split over 2 gloo ranks equals one process.

Under hardware.context_parallel each example becomes a packed row of one response (PackedScoresCollator), split
through the forward Bradley-Terry and listwise read (rmspec.train.context_parallel_run.split_head_outputs); one
process keeps its padded sequences (ScoresCollator). Both parts hold the split to that padded one process, on a
tiny Llama (2 layers, hidden 32, fp32):

- The split forward itself (``score_outputs`` with a context-parallel group, the trainer's path) on a packed batch
  against the padded forward of the same examples in one process: every rank's [B, 2] head outputs, the loss (an
  unscored attribute skipped) and the gradient of every parameter (the two ranks' summed), each within 1e-5. The
  batch holds one example long enough to fill its row alone (an odd width, padded to 4 chunks), the others sharing
  a row, one of a single token; read points fall on both ranks.
- ``rmspec run`` with hardware.context_parallel: 2 on 2 processes (one group, gradient checkpointing on) against
  the same spec on one process (padded batches, no checkpointing), 3 steps of 4 examples (micro batch 2,
  accumulation 2), SGD with clipping out of reach (tests/test_context_parallel_run.py says why): every step's loss
  within 1e-5, the gradient norms within 5e-5 relative, the final weights within 1e-5, and the final evaluation's
  figures. A sitecustomize on the children's PYTHONPATH (test only) records each split forward, so the test shows
  the run did split examples over both ranks and padded an odd width.
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
    split_forwards,
    tiny_scorer,
)

VOCAB, PAD, TOL = 97, 0, 1e-5


def test_pointwise_rows_are_packed_only_where_they_are_split():
    from transformers import BertConfig

    from rmspec.train.packing import OFF, SHARED_PREFIX, packing_path

    decoder = tiny_llama_config()
    decoder._attn_implementation = "sdpa"
    assert packing_path("auto", "pointwise", decoder)[0] == OFF  # one process: padded, as before
    path, why = packing_path("auto", "pointwise", decoder, split=True)
    assert path == SHARED_PREFIX and "split by hardware.context_parallel" in why
    assert packing_path("off", "pointwise", decoder, split=True)[0] == OFF
    assert packing_path("auto", "pointwise", BertConfig(), split=True)[0] == OFF  # an encoder never packs


# ---------------------------------------------------------------- the split forward, 2 gloo ranks


def tiny():
    return tiny_scorer(2, VOCAB, PAD)


def examples() -> list[dict]:
    """One example of 141 tokens (its own row: width 141, odd), five short ones sharing the second row (one of a
    single token); two attributes, one unscored (None) on one example."""
    g = torch.Generator().manual_seed(5)
    rows = []
    for n in (141, 57, 40, 23, 9, 1):
        ids = torch.randint(1, VOCAB, (n,), generator=g).tolist()
        rows.append({"input_ids": ids, "scores": (4 * torch.rand(2, generator=g)).tolist()})
    rows[2]["scores"][1] = None
    return rows


def worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from rmspec.train.collators import ScoresCollator
    from rmspec.train.context_parallel import balanced_columns
    from rmspec.train.context_parallel_run import prepare_model
    from rmspec.train.losses import masked_mse
    from rmspec.train.pointwise import PackedScoresCollator, score_outputs

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        batch = PackedScoresCollator(PAD)(examples())
        model = tiny()
        groups = prepare_model(model, world)  # the trainer's path: check, register, the group
        outputs = score_outputs(model, batch, groups)
        loss = masked_mse(outputs, batch["scores"])
        loss.backward()
        every = [torch.empty_like(outputs) for _ in range(world)]
        dist.all_gather(every, outputs.detach())  # each rank's outputs, compared below
        averaged_as_ddp(model)  # the group's shares, each sent back N times over, averaged: one process's
        if rank == 0:
            # one process as it trains pointwise: padded sequences, the model's own pooling at the last token
            padded = ScoresCollator(PAD)(examples())
            reference = tiny()
            want = score_outputs(reference, padded)
            want_loss = masked_mse(want, padded["scores"])
            want_loss.backward()
            grads = {
                name: (float((p.grad - q.grad).abs().max()), float(q.grad.abs().max()))
                for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters(), strict=True)
            }
            width = batch["input_ids"].shape[1]
            padded_width = width + (-width % (2 * world))
            owner = {c: r for r in range(world) for c in balanced_columns(padded_width, world, r).tolist()}
            result = {
                "outputs": [float((o - want.detach()).abs().max()) for o in every],
                "output_scale": float(want.detach().abs().max()),
                "loss": abs(loss.item() - want_loss.item()),
                "loss_value": want_loss.item(),
                "grads": grads,
                "width": width,
                "rows": int(batch["input_ids"].shape[0]),
                "holders": [owner[e % width] for e in batch["packed_ends"].tolist()],
                "unscored": int(torch.isnan(batch["scores"]).sum()),
            }
            Path(out).write_text(json.dumps(result))
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    result = on_two_ranks(worker, tmp_path_factory.mktemp("cp-pointwise"))
    print("split pointwise forward: outputs", result["outputs"], "loss", result["loss"],
          "grads", max(d for d, _ in result["grads"].values()))  # fmt: skip
    return result


def test_the_batch_covers_what_it_claims(measured):
    assert measured["width"] == 141  # odd: padded to 4 chunks
    assert measured["rows"] == 2  # the five short examples share a row
    assert sorted(set(measured["holders"])) == [0, 1]  # read points on both ranks
    assert measured["unscored"] == 1


def test_split_scores_loss_and_gradients_equal_one_padded_process(measured):
    assert measured["output_scale"] > 0 and measured["loss_value"] > 0
    assert max(measured["outputs"]) <= TOL, measured["outputs"]  # every rank holds every example's outputs
    assert measured["loss"] <= TOL
    assert_gradients_equal(measured["grads"], TOL)


# ---------------------------------------------------------------- rmspec run, 1 process against 2 split

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [scored.jsonl]}}
  mapping: {{preset: helpsteer2}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: pointwise, attributes: [helpfulness, verbosity]}}
"""  # then helpers.split_runs.RUN

ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")


def write_scored(path: Path, n: int = 40) -> None:
    """Learnable scores in the tiny vocabulary, HelpSteer2's layout: helpfulness is how many w1 the response holds,
    verbosity how many w2; a short prompt, so two examples of a micro batch share a packed row."""
    rng = random.Random(0)
    words = lambda k: " ".join(f"w{rng.randint(10, 70)}" for _ in range(k))  # noqa: E731
    with path.open("w") as fh:
        for i in range(n):
            scores = {a: rng.randint(0, 4) for a in ATTRIBUTES}
            parts = ["w1"] * scores["helpfulness"] + ["w2"] * scores["verbosity"] + words(rng.randint(1, 6)).split()
            rng.shuffle(parts)
            row = {"id": f"s{i}", "prompt": words(rng.randint(1, 7)), "response": " ".join(parts), **scores}
            fh.write(json.dumps(row) + "\n")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cp-pointwise-run")
    write_scored(tmp / "scored.jsonl")
    return one_and_split(tmp, SPEC)


def test_a_pointwise_run_split_over_two_processes_equals_one(runs):
    plan, status = assert_split_equals_one(runs, "pointwise")
    assert plan["packing"] == "shared_prefix"  # packed because split
    assert json.loads((runs["one"] / "plan.json").read_text())["packing"] == "off"  # one process: padded, as before
    # The final evaluation split the validation examples too (one batch on each rank: the spy below), with the
    # one process's figures, as far as the weights are (the repeats that fill the groups' batches count in none)
    assert_evaluated_as_one(
        runs, status, {"eval/rm/loss", "eval/rm/mse", "eval/rm/helpfulness/mae", "eval/rm/verbosity/pearson"}
    )


def test_the_run_split_examples_over_both_ranks_and_padded_odd_widths(runs):
    """What the split forward saw (the spy): the 6 micro batches of the 3 steps, each rank the same rows, each
    example's read point on one rank, read points on both ranks, examples whose tokens lie on both ranks, an odd
    width. The final evaluation's batch is split too (no gradient)."""
    forwards = split_forwards(runs)
    held_by = [sum(held for pair in forwards for _, held in pair[rank]["read"]) for rank in (0, 1)]
    assert held_by[0] > 0 and held_by[1] > 0, held_by
    spanning = sum(len({g for g, _ in c0["read"]} & set(c0["touched"]) & set(c1["touched"])) for c0, c1 in forwards)
    assert spanning > 0, "no example had tokens on both ranks"
