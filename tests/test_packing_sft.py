"""Bradley-Terry's SFT term (approach.sft_weight) on prompt-once rows equals the two-sequence path, and split over
2 gloo ranks equals one process.

The term is the mean next-token NLL of the chosen response's tokens after the prefix the pair shares
(rmspec.train.pair_extras.chosen_response_labels on the two padded sequences). In a packed row
[prefix | chosen | rejected] each of those tokens is predicted from the hidden state before it in the chosen
sequence (rmspec.train.pair_extras.packed_sft_targets), which the row's mask makes the same state as in the chosen
sequence alone. On a tiny Llama (2 layers, hidden 32, fp32) with an LM head beside the score head, the trainer's own
compute_loss on both batches gives the same rewards, SFT term, loss and gradient of every parameter (1e-5). The
pairs cover the edges of "shared": no prompt; a chosen response that starts with the rejected one's first words
(those tokens are not labelled); a rejected response that is a prefix of the chosen one (the packed prefix is cut one
token short of the shared one there: split_shared_prefix keeps a token per response); a chosen response that is a
prefix of the rejected one (nothing labelled).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from helpers.split_runs import assert_gradients_equal, averaged_as_ddp, on_two_ranks, tiny_scorer

VOCAB, PAD, TOL, WEIGHT = 97, 0, 1e-5, 0.5


def tiny():
    from rmspec.train.pair_extras import LM_HEAD_MODULE

    model = tiny_scorer(1, VOCAB, PAD)
    model.add_module(LM_HEAD_MODULE, torch.nn.Linear(32, VOCAB, bias=False))
    return model


def pairs() -> list[dict]:
    g = torch.Generator().manual_seed(11)

    def draw(n: int) -> list[int]:
        return torch.randint(1, VOCAB, (n,), generator=g).tolist()

    rows = []
    prompt = draw(41)
    rows.append((prompt + draw(60), prompt + draw(46)))  # long: fills a row alone, its targets on both ranks
    rows.append((draw(7), draw(5)))  # no prompt
    prompt, lead = draw(9), draw(3)
    rows.append((prompt + lead + draw(6), prompt + lead + draw(4)))  # the responses share their first 3 tokens
    prompt, rejected = draw(6), draw(4)
    rows.append((prompt + rejected + draw(5), prompt + rejected))  # the rejected response a prefix of the chosen
    prompt, chosen = draw(5), draw(3)
    rows.append((prompt + chosen, prompt + chosen + draw(4)))  # the chosen a prefix of the rejected: no target
    rows.append((draw(13) + draw(8), draw(13) + draw(2)))
    return [{"chosen_input_ids": c, "rejected_input_ids": r} for c, r in rows]


def trainer(model, split=None):
    """A BradleyTerryTrainer made without __init__: compute_loss reads only these attributes."""
    from rmspec.train.bradley_terry import BradleyTerryTrainer

    made = BradleyTerryTrainer.__new__(BradleyTerryTrainer)
    made.sft_weight, made.tie, made.margin_mode, made.center_rewards_coefficient = WEIGHT, None, "none", None
    made.context_parallel, made._interval = split, defaultdict(list)
    made.accelerator = SimpleNamespace(unwrap_model=lambda m: m)
    return made


def test_the_packed_targets_are_the_two_sequence_labels():
    from rmspec.train.collators import PairCollator
    from rmspec.train.packing import PackedPairCollator
    from rmspec.train.pair_extras import SFT_LABELS, SFT_POSITIONS, chosen_response_labels

    rows = pairs()
    packed = PackedPairCollator(PAD, sft=True)(rows)
    plain = PairCollator(PAD)(rows)
    half = plain["input_ids"].shape[0] // 2
    labels = chosen_response_labels(
        plain["input_ids"][:half], plain["input_ids"][half:], plain["attention_mask"][:half]
    )
    want = labels[:, 1:][labels[:, 1:] != -100]  # sft_term's shift: position t predicts label t + 1
    assert torch.equal(packed[SFT_LABELS], want)
    # each target's position holds the token before it in the chosen sequence, at the position before it
    flat_ids, flat_pos = packed["input_ids"].reshape(-1), packed["position_ids"].reshape(-1)
    chosen = plain["input_ids"][:half]
    before = [(i, t) for i in range(half) for t in range(1, chosen.shape[1]) if labels[i, t] != -100]
    assert [flat_pos[p].item() for p in packed[SFT_POSITIONS]] == [t - 1 for _, t in before]
    assert [flat_ids[p].item() for p in packed[SFT_POSITIONS]] == [chosen[i, t - 1].item() for i, t in before]
    assert packed["input_ids"].shape[0] < len(rows)  # several pairs share a row
    per_pair = [int((labels[i, 1:] != -100).sum()) for i in range(half)]
    assert per_pair[1] == 6 and per_pair[2] == 6 and per_pair[3] == 5 and per_pair[4] == 0  # the edges above


def test_the_packed_sft_loss_and_gradients_equal_two_sequences():
    from rmspec.train.collators import PairCollator
    from rmspec.train.packing import PackedPairCollator

    rows = pairs()
    results = {}
    for name, batch in (("plain", PairCollator(PAD)(rows)), ("packed", PackedPairCollator(PAD, sft=True)(rows))):
        model = tiny()
        made = trainer(model)
        loss, out = made.compute_loss(model, batch, return_outputs=True)
        loss.backward()
        results[name] = (loss.item(), out["chosen"].detach(), out["rejected"].detach(), model, made._interval)
    (loss_a, c_a, r_a, model_a, log_a), (loss_b, c_b, r_b, model_b, log_b) = results["plain"], results["packed"]
    assert log_a["sft_loss"][0] > 1.0  # the LM term is there, near log(97) = 4.6 on a fresh model
    assert log_b["sft_loss"][0] == pytest.approx(log_a["sft_loss"][0], abs=TOL)
    assert loss_b == pytest.approx(loss_a, abs=TOL)
    assert (c_a - c_b).abs().max() <= TOL and (r_a - r_b).abs().max() <= TOL
    grads = {
        name: (float((p.grad - q.grad).abs().max()), float(q.grad.abs().max()))
        for (name, p), (_, q) in zip(model_b.named_parameters(), model_a.named_parameters(), strict=True)
    }
    assert "rmspec_lm_head.weight" in grads
    assert_gradients_equal(grads, TOL)


# ---------------------------------------------------------------- split over 2 gloo ranks


def worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from rmspec.train.context_parallel_run import prepare_model
    from rmspec.train.packing import PackedPairCollator
    from rmspec.train.pair_extras import SFT_POSITIONS

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        batch = PackedPairCollator(PAD, sft=True)(pairs())
        model = tiny()
        made = trainer(model, None)
        made.context_parallel = prepare_model(model, world)
        loss, got = made.compute_loss(model, batch, return_outputs=True)
        loss.backward()
        averaged_as_ddp(model)
        held = torch.tensor([0])  # how many targets this rank's columns hold
        from rmspec.inference.packed_forward import StatesAt
        from rmspec.train.context_parallel_run import split_head_outputs

        with torch.no_grad():
            request = StatesAt(batch[SFT_POSITIONS])
            split_head_outputs(model, batch, made.context_parallel, request)
            held[0] = request.held.numel()
        counts = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
        dist.all_gather(counts, held)
        sft = torch.tensor([made._interval["sft_loss"][0]])
        every = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(every, sft)
        if rank == 0:
            reference = tiny()
            one = trainer(reference)
            want_loss, want = one.compute_loss(reference, batch, return_outputs=True)
            want_loss.backward()
            result = {
                "loss": abs(loss.item() - want_loss.item()),
                "sft": [abs(s.item() - one._interval["sft_loss"][0]) for s in every],
                "rewards": float(
                    max((got["chosen"] - want["chosen"]).abs().max(), (got["rejected"] - want["rejected"]).abs().max())
                ),
                "held": [int(c.item()) for c in counts],
                "targets": int(batch[SFT_POSITIONS].numel()),
                "grads": {
                    name: (float((p.grad - q.grad).abs().max()), float(q.grad.abs().max()))
                    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters(), strict=True)
                },
            }
            Path(out).write_text(json.dumps(result))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_the_split_sft_loss_and_gradients_equal_one_process(tmp_path):
    got = on_two_ranks(worker, tmp_path)
    assert all(h > 0 for h in got["held"]) and sum(got["held"]) == got["targets"]  # each target on one rank
    assert max(got["sft"]) <= TOL  # every rank logs the whole term
    assert got["loss"] <= TOL and got["rewards"] <= TOL
    assert "rmspec_lm_head.weight" in got["grads"]
    assert_gradients_equal(got["grads"], TOL)


# ---------------------------------------------------------------- rmspec run, 1 process against 2 split


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    from helpers.runs import write_pairs
    from helpers.split_runs import PAIRS_HEAD, one_and_split

    tmp = tmp_path_factory.mktemp("cp-sft-run")
    write_pairs(tmp / "pairs.jsonl", 40)
    # a causal LM saved: the LM head the SFT term reads is its own (loaded, not drawn at random in each run)
    return one_and_split(tmp, PAIRS_HEAD, causal=True, learning_rate=0.1, options=f"sft_weight: {WEIGHT}")


def test_an_sft_run_split_over_two_processes_equals_one(runs):
    from helpers.runs import metrics_rows
    from helpers.split_runs import assert_evaluated_as_one, assert_split_equals_one, split_forwards, weights

    plan, status = assert_split_equals_one(runs, "sft")
    assert plan["packing"] == "shared_prefix"  # prompt-once rows, the SFT term read in them
    assert_evaluated_as_one(runs, status, {"eval/rm/accuracy"})
    split_forwards(runs)  # the spy: 6 micro batches split over both ranks, an odd width, one holder each
    sft = {
        run: [r["train/rm/sft_loss"] for r in metrics_rows(runs[run]) if "train/rm/sft_loss" in r]
        for run in ("one", "cp")
    }
    assert len(sft["one"]) == 3 and sft["cp"] == pytest.approx(sft["one"], abs=1e-5)
    saved = weights(runs["cp"] / "model")
    assert "lm_head.weight" not in json.dumps(sorted(saved))  # the saved model: the score head
