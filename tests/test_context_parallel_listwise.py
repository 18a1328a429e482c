"""Listwise (ranked lists, Plackett-Luce) split over 2 gloo ranks equals one process.

Two parts, both on a tiny Llama (2 layers, hidden 32, fp32):

- The split forward itself (``list_rewards`` with a context-parallel group, the trainer's path through
  rmspec.train.context_parallel_run.split_head_outputs) on a PackedListCollator batch against the whole
  forward in one process: every rank's [B, K] rewards, the loss (top_k and the centring term on) and the
  gradient of every parameter (the two ranks' summed), each within 1e-5. The batch holds lists of 2 to 5
  responses (list_index padded with -1), several lists to a row, an odd width (padded to 4 chunks), and one
  list whose read points fall on both ranks.
- ``rmspec run`` with hardware.context_parallel: 2 on 2 processes (one group: each packed row split over
  both, gradient checkpointing on) against the same spec on one process, 3 steps of 4 lists (micro batch 2,
  accumulation 2), SGD with clipping out of reach (see tests/test_context_parallel_run.py for why): every
  step's loss within 1e-5, the gradient norms within 5e-5 relative and the final weights within 1e-5. A
  sitecustomize on the children's PYTHONPATH (test only) records each split forward's width and which rank
  held each read point, so the test shows the run did split lists over both ranks and padded an odd width.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from helpers.split_runs import (
    assert_evaluated_as_one,
    assert_gradients_equal,
    assert_split_equals_one,
    averaged_as_ddp,
    column_owners,
    on_two_ranks,
    one_and_split,
    read_on_both_ranks,
    split_forwards,
    tiny_scorer,
)

VOCAB, PAD, TOL = 97, 0, 1e-5
TOP_K, CENTER = 3, 0.05

# ---------------------------------------------------------------- the split forward, 2 gloo ranks


def tiny():
    return tiny_scorer(1, VOCAB, PAD)


def lists() -> list[dict]:
    """Lists of 2 to 5 responses; the first is long enough to fill its row alone (its 4 read points spread
    over the row: both ranks), the others share rows."""
    g = torch.Generator().manual_seed(3)

    def draw(n: int) -> list[int]:
        return torch.randint(1, VOCAB, (n,), generator=g).tolist()

    rows = []
    prompt = draw(41)
    rows.append({"responses_input_ids": [prompt + draw(n) for n in (60, 47, 71, 52)], "scores": [2.0, 4.0, 1.0, 3.0]})
    for k, n_prompt in ((2, 9), (5, 13), (3, 0), (4, 21)):
        prompt = draw(n_prompt)
        responses = [prompt + draw(3 + 4 * i) for i in range(k)]
        rows.append({"responses_input_ids": responses, "scores": torch.rand(k, generator=g).tolist()})
    return rows


def loss_of(rewards: torch.Tensor, mask: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    from rmspec.train.objectives.listwise import plackett_luce_loss

    return plackett_luce_loss(rewards, scores, mask, TOP_K) + CENTER * (rewards[mask] ** 2).mean()


def worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from rmspec.train.context_parallel_run import prepare_model
    from rmspec.train.listwise import PackedListCollator, list_rewards

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        batch = PackedListCollator(PAD)(lists())
        model = tiny()
        groups = prepare_model(model, world)  # the trainer's path: check, register, the group
        rewards, mask = list_rewards(model, batch, groups)
        loss = loss_of(rewards, mask, batch["list_scores"])
        loss.backward()
        every = [torch.empty_like(rewards) for _ in range(world)]
        dist.all_gather(every, rewards.detach())  # each rank's rewards, compared below
        averaged_as_ddp(model)  # the group's shares, each sent back N times over, averaged: one process's
        if rank == 0:
            reference = tiny()  # one process: the ordinary packed forward, the whole row's mask
            want, want_mask = list_rewards(reference, batch)
            want_loss = loss_of(want, want_mask, batch["list_scores"])
            want_loss.backward()
            grads = {
                name: (float((p.grad - q.grad).abs().max()), float(q.grad.abs().max()))
                for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters(), strict=True)
            }
            width = batch["input_ids"].shape[1]
            owner = column_owners(width, world)
            group = batch["packed_group"].reshape(-1)[batch["packed_ends"]].tolist()
            holders: dict[int, set[int]] = {}
            for g, e in zip(group, batch["packed_ends"].tolist(), strict=True):
                holders.setdefault(g, set()).add(owner[e % width])
            result = {
                "rewards": [float((r - want.detach()).abs().max()) for r in every],
                "reward_scale": float(want.detach().abs().max()),
                "mask_equal": bool(torch.equal(mask, want_mask)),
                "loss": abs(loss.item() - want_loss.item()),
                "grads": grads,
                "width": width,
                "rows": int(batch["input_ids"].shape[0]),
                "list_sizes": want_mask.sum(1).tolist(),
                "holders": {str(g): sorted(h) for g, h in holders.items()},
            }
            Path(out).write_text(json.dumps(result))
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    result = on_two_ranks(worker, tmp_path_factory.mktemp("cp-list"))
    print("split list forward: rewards", result["rewards"], "loss", result["loss"],
          "grads", max(d for d, _ in result["grads"].values()))  # fmt: skip
    return result


def test_the_batch_covers_what_it_claims(measured):
    assert measured["width"] % 2 == 1  # odd: padded to 4 chunks
    assert measured["rows"] < 5  # several lists share a row
    assert sorted(measured["list_sizes"]) == [2, 3, 4, 4, 5]  # list_index padded with -1 for the shorter
    assert measured["holders"]["0"] == [0, 1]  # one list's read points on both ranks


def test_split_list_rewards_loss_and_gradients_equal_one_process(measured):
    assert measured["mask_equal"]
    assert measured["reward_scale"] > 0
    assert max(measured["rewards"]) <= TOL, measured["rewards"]  # every rank holds every reward
    assert measured["loss"] <= TOL
    assert_gradients_equal(measured["grads"], TOL)


# ---------------------------------------------------------------- rmspec run, 1 process against 2 split

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [ranked.jsonl]}}
  mapping: {{preset: ranked}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: listwise, top_k: {top_k}, center_rewards_coefficient: {center}}}
"""  # then helpers.split_runs.RUN


def write_lists(path: Path, n: int = 40) -> None:
    """Learnable lists in the tiny vocabulary: the more w1 a response starts with, the higher its score; 3 or 4
    responses of a few words each after a short prompt, so a packed row's read points spread along it."""
    rng = random.Random(0)
    words = lambda k: " ".join(f"w{rng.randint(10, 70)}" for _ in range(k))  # noqa: E731
    with path.open("w") as fh:
        for i in range(n):
            quality = rng.sample(range(5), rng.choice([3, 4]))
            responses = [" ".join(["w1"] * q + [words(rng.randint(2, 6))]) for q in quality]
            row = {"id": f"l{i}", "prompt": words(rng.randint(1, 7)), "responses": responses, "scores": quality}
            fh.write(json.dumps(row) + "\n")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cp-list-run")
    write_lists(tmp / "ranked.jsonl")
    return one_and_split(tmp, SPEC, learning_rate=0.1, top_k=TOP_K, center=CENTER)


def test_a_listwise_run_split_over_two_processes_equals_one(runs):
    _, status = assert_split_equals_one(runs, "listwise")
    assert {"eval/rm/accuracy", "eval/rm/kendall_tau"} <= set(status["metrics"])
    # The final evaluation split the validation lists too (8 lists in one batch, filled to 16 with repeats that
    # count in no figure; tests/test_context_parallel_eval.py for pairs): the one process's figures, as far as the
    # weights are (mean reward 1.3e-5 relative apart: 3 steps at rate 0.1), and to float noise the one-process
    # scoring of this run's own saved model (rmspec.evaluate's per-list rewards, eval/validation.jsonl)
    assert_evaluated_as_one(runs, status, {"eval/rm/loss", "eval/rm/accuracy", "eval/rm/ranked_pairs"})
    scored = [json.loads(line) for line in (runs["cp"] / "eval" / "validation.jsonl").read_text().splitlines()]
    rewards = [r for row in scored for r in row["rewards"]]
    assert status["metrics"]["eval/rm/mean_reward"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-6)


def test_the_run_split_lists_over_both_ranks_and_padded_odd_widths(runs):
    """What the split forward saw (the spy): the 6 micro batches of the 3 steps, each rank the same rows; a
    list with read points on both ranks; an odd width. The final evaluation's batch is split too (no gradient)."""
    assert read_on_both_ranks(split_forwards(runs)) > 0, "no list had read points on both ranks"
