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
import os
import random
from pathlib import Path

import pytest
import torch

from helpers.models import build_model, tiny_llama_config
from helpers.runs import metrics_rows, rmspec
from helpers.serve_process import free_port

VOCAB, PAD, TOL = 97, 0, 1e-5
TOP_K, CENTER = 3, 0.05

# ---------------------------------------------------------------- the split forward, 2 gloo ranks


def tiny():
    from transformers import AutoModelForSequenceClassification

    config = tiny_llama_config(vocab_size=VOCAB, max_position_embeddings=512, pad_token_id=PAD, num_labels=1)
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa").train()


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

    from rmspec.train.context_parallel import balanced_columns
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
        for p in model.parameters():
            dist.reduce(p.grad, dst=0)  # the group's gradients add up to one process's
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
            padded = width + (-width % (2 * world))
            owner = {c: r for r in range(world) for c in balanced_columns(padded, world, r).tolist()}
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
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("cp-list") / "results.json"
    mp.start_processes(worker, args=(2, free_port(), str(out)), nprocs=2, start_method="spawn", join=True)
    result = json.loads(out.read_text())
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
    assert measured["grads"], "no parameter compared"
    for name, (diff, scale) in measured["grads"].items():
        assert scale > 0, f"{name}: no gradient reached it in one process"
        assert diff <= TOL, f"{name} gradient differs by {diff} (largest {scale})"


# ---------------------------------------------------------------- rmspec run, 1 process against 2 split

SPEC = """version: 1
name: {name}
model: {{name_or_path: {model}}}
data:
  source: {{kind: files, paths: [ranked.jsonl]}}
  mapping: {{preset: ranked}}
  split: {{validation_fraction: 0.2, seed: 0}}
approach: {{kind: listwise, top_k: {top_k}, center_rewards_coefficient: {center}}}
training:
  learning_rate: 0.1
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

# TEST ONLY, on the children's PYTHONPATH: in rmspec's training processes, record every split forward's
# width and the rank that holds each read point (with its list), one JSON line per call and rank.
SPY = """
import os, sys
if "rmspec.launch.entrypoint" in sys.orig_argv and os.environ.get("RMSPEC_TEST_CP_SPY"):
    import json
    import torch
    import torch.distributed as dist
    from rmspec.train import context_parallel as cp

    whole = cp.head_outputs

    def head_outputs(model, rows, group=None):
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        width = rows.input_ids.shape[1]
        padded = cp.pad_columns(rows, 2 * size)
        mine = set(cp.balanced_columns(padded.input_ids.shape[1], size, rank).tolist())
        ends = padded.ends % padded.input_ids.shape[1]
        lists = rows.group.reshape(-1)[rows.ends].tolist()
        held = [[g, int(e) in mine] for g, e in zip(lists, ends.tolist())]
        with open(os.path.join(os.environ["RMSPEC_TEST_CP_SPY"], f"rank{rank}.jsonl"), "a") as fh:
            fh.write(json.dumps({"width": width, "held": held, "training": torch.is_grad_enabled()}) + "\\n")
        return whole(model, rows, group)

    cp.head_outputs = head_outputs
"""


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


def _spec(tmp: Path, name: str, procs: int, model: Path, degree: int = 1) -> Path:
    spec = tmp / f"{name}.yaml"
    cp = f", context_parallel: {degree}" if degree > 1 else ""
    out = tmp / "runs" / name
    # the split run recomputes each layer's split forward in the backward (gradient checkpointing), as the
    # pairs' test does; the one process runs without
    checkpointing = '"on"' if degree > 1 else '"off"'
    text = SPEC.format(
        name=name, model=model, procs=procs, cp=cp, out=out, top_k=TOP_K, center=CENTER, checkpointing=checkpointing
    )
    spec.write_text(text)
    return spec


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cp-list-run")
    write_lists(tmp / "ranked.jsonl")
    model = build_model("llama", tmp / "model-src")
    site, spied = tmp / "site", tmp / "spied"
    site.mkdir()
    spied.mkdir()
    (site / "sitecustomize.py").write_text(SPY)
    one, cp = _spec(tmp, "one", 1, model), _spec(tmp, "cp", 2, model, 2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
        mp.setenv("RMSPEC_TEST_CP_SPY", str(spied))
        for spec in (one, cp):
            done = rmspec("run", str(spec), cwd=tmp, timeout=600)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {"one": tmp / "runs" / "one", "cp": tmp / "runs" / "cp", "spied": spied, "model": model}


def _losses(run: Path) -> dict[int, tuple[float, float]]:
    rows = [r for r in metrics_rows(run) if "train/rm/loss" in r]
    steps = [r["step"] for r in rows]
    assert len(set(steps)) == len(steps), f"a step logged twice in {run}: {steps}"
    return {r["step"]: (r["train/rm/loss"], r["grad_norm"]) for r in rows}


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_a_listwise_run_split_over_two_processes_equals_one(runs):
    want, got = _losses(runs["one"]), _losses(runs["cp"])
    assert sorted(got) == sorted(want) == [1, 2, 3]
    for step, (loss, norm) in want.items():
        assert got[step][0] == pytest.approx(loss, abs=1e-5), step
        # the group's gradients summed, not averaged (a factor 2 off)
        assert got[step][1] == pytest.approx(norm, rel=5e-5), step
    a, b = _weights(runs["one"] / "model"), _weights(runs["cp"] / "model")
    assert sorted(a) == sorted(b)
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    start = _weights(runs["model"])  # the backbone before training: equal weights mean equal training, not none
    same = {k: k if k in start else k.removeprefix("model.") for k in a}
    moved = max((a[k].float() - start[s].float()).abs().max().item() for k, s in same.items() if s in start)
    print(f"listwise split: losses {got}, against {want}; largest weight difference {worst:.2e}, moved {moved:.2e}")
    assert worst <= 1e-5 < moved
    plan = json.loads((runs["cp"] / "plan.json").read_text())
    assert plan["context_parallel"]["degree"] == 2 and plan["context_parallel"]["run_refused"] is None
    assert plan["gradient_checkpointing"] is True  # recomputed in the backward, attending split there too
    status = json.loads((runs["cp"] / "status.json").read_text())
    assert (status["world_size"], status["global_batch_size"], status["state"]) == (2, 4, "completed")
    assert {"eval/rm/accuracy", "eval/rm/kendall_tau"} <= set(status["metrics"])
    # The final evaluation split the validation lists too (8 lists in one batch, filled to 16 with repeats that
    # count in no figure; tests/test_context_parallel_eval.py for pairs): the one process's figures, as far as the
    # weights are (mean reward 1.3e-5 relative apart: 3 steps at rate 0.1), and to float noise the one-process
    # scoring of this run's own saved model (rmspec.evaluate's per-list rewards, eval/validation.jsonl)
    single = json.loads((runs["one"] / "status.json").read_text())["metrics"]
    figures = [k for k in single if k.startswith("eval/") and not k.endswith(("runtime", "per_second"))]
    assert {"eval/rm/loss", "eval/rm/accuracy", "eval/rm/ranked_pairs"} <= set(figures)
    for key in figures:
        assert status["metrics"][key] == pytest.approx(single[key], rel=1e-4), key
    scored = [json.loads(line) for line in (runs["cp"] / "eval" / "validation.jsonl").read_text().splitlines()]
    rewards = [r for row in scored for r in row["rewards"]]
    assert status["metrics"]["eval/rm/mean_reward"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-6)


def test_the_run_split_lists_over_both_ranks_and_padded_odd_widths(runs):
    """What the split forward saw (the spy): the 6 micro batches of the 3 steps, each rank the same rows; a
    list with read points on both ranks; an odd width. The final evaluation's batch is split too (no gradient)."""
    spied = {
        r: [json.loads(line) for line in (runs["spied"] / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)
    }
    calls = {r: [c for c in spied[r] if c["training"]] for r in spied}
    assert len(calls[0]) == len(calls[1]) == 6
    assert [len(spied[r]) - 6 for r in spied] == [1, 1]  # the validation's one batch, evaluated split
    assert [c["width"] for c in calls[0]] == [c["width"] for c in calls[1]]
    assert any(w % 2 for w in (c["width"] for c in calls[0])), "no odd width"
    both = 0
    for c0, c1 in zip(calls[0], calls[1], strict=True):
        assert [g for g, _ in c0["held"]] == [g for g, _ in c1["held"]]
        assert all(a != b for (_, a), (_, b) in zip(c0["held"], c1["held"], strict=True))  # one holder each
        lists = {g for g, _ in c0["held"]}
        both += sum(len({h for g, h in c0["held"] if g == k}) == 2 for k in lists)
    assert both > 0, "no list had read points on both ranks"
