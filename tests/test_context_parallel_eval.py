"""Evaluation under hardware.context_parallel: 2 splits each validation row over the group and counts it once.

`rmspec run` on a tiny Llama (Bradley-Terry, prompt-once rows), one process against 2 gloo processes forming one
context-parallel group, 1 SGD step (the training equality itself is tests/test_context_parallel_run.py's), a
validation split of 12 pairs in evaluation batches of 5 (5, 5, 2: the last one short, which one group computes as
it is, with no repeats: there is no other group to keep in step), evaluated at step 1
(the Trainer's evaluate) and at the end (its predict, whose rewards give the reward statistics): the eval loss,
accuracy and reward figures equal the one process's within 1e-5. A sitecustomize on the children's PYTHONPATH
(test only) records every split forward (whether it trained, how many responses it read) and the rows each
compute_metrics call got, so the test shows that the evaluation ran split on both ranks and that every
validation row reached the metrics once (gathering both ranks' outputs would count each twice). The gather's
de-duplication across 2 groups of 2 (and the last batch's repeats) is checked on its own below, without processes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.context_parallel import assert_pairs_evaluated_as_one_process, split_spec
from helpers.models import build_model
from helpers.runs import metrics_rows, rmspec

TRAINING = (
    "  max_steps: 1\n  micro_batch_size: 2\n  eval_steps: 1\n  optimizer: sgd\n  max_grad_norm: 1000.0\n"
    '  gradient_checkpointing: "off"'
)
VALIDATION_ROWS = 12  # 60 rows, validation_fraction 0.2
EVAL_BATCH = 10  # eval.batch_size: the Trainer's per-device evaluation batch is half of it, 5

# TEST ONLY, on the children's PYTHONPATH: in rmspec's training processes, one JSON line per split forward (did it
# train, how many responses it read) and per compute_metrics call (how many rows it got), by rank.
SPY = """
import os, sys
if "rmspec.launch.entrypoint" in sys.orig_argv and os.environ.get("RMSPEC_TEST_CP_EVAL_SPY"):
    import json
    import torch
    import torch.distributed as dist
    from rmspec.train import bradley_terry, context_parallel

    def note(**row):
        rank = dist.get_rank() if dist.is_initialized() else 0
        with open(os.path.join(os.environ["RMSPEC_TEST_CP_EVAL_SPY"], f"rank{rank}.jsonl"), "a") as fh:
            fh.write(json.dumps(row) + "\\n")

    whole, metrics = context_parallel.head_outputs, bradley_terry.compute_pair_metrics

    def head_outputs(model, rows, group=None, states=None):
        note(kind="split", training=torch.is_grad_enabled(), responses=int(rows.ends.numel()))
        return whole(model, rows, group, states)

    def compute_pair_metrics(eval_pred):
        note(kind="metrics", rows=len(eval_pred.predictions))
        return metrics(eval_pred)

    context_parallel.head_outputs, bradley_terry.compute_pair_metrics = head_outputs, compute_pair_metrics
"""


def _spec(tmp: Path, name: str, procs: int, model: Path) -> Path:
    return split_spec(
        tmp, name, procs, model, TRAINING, {"benchmarks: []}": f"benchmarks: [], batch_size: {EVAL_BATCH}}}"}
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cp-eval")
    model = build_model("llama", tmp / "model-src")
    site = tmp / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SPY)
    out: dict[str, Path] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
        for name, procs in (("one", 1), ("cp", 2)):
            spied = out[f"{name}-spied"] = tmp / f"spied-{name}"
            spied.mkdir()
            mp.setenv("RMSPEC_TEST_CP_EVAL_SPY", str(spied))
            done = rmspec("run", str(_spec(tmp, name, procs, model)), cwd=tmp, timeout=600)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            out[name] = tmp / "runs" / name
    return out


def _evaluations(run: Path) -> list[dict[str, float]]:
    """Each evaluation's figures from metrics.jsonl (step 1's, then the final one's), timings left out."""
    rows = [r for r in metrics_rows(run) if any(k.startswith("eval/") for k in r)]
    timing = ("runtime", "per_second")
    return [{k: v for k, v in r.items() if k.startswith("eval/") and not any(t in k for t in timing)} for r in rows]


def _spied(folder: Path, rank: int) -> list[dict]:
    path = folder / f"rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_split_evaluation_equals_one_process(runs):
    want, got = _evaluations(runs["one"]), _evaluations(runs["cp"])
    assert len(want) == len(got) == 2, (want, got)  # at step 1 (evaluate) and the final one (predict)
    for before, after in zip(want, got, strict=True):
        assert sorted(before) == sorted(after)
        assert {"eval/rm/loss", "eval/rm/accuracy"} <= set(before), sorted(before)
        for key, value in before.items():
            assert after[key] == pytest.approx(value, abs=1e-5), key
    print("one process:", want[-1], "\nsplit:", got[-1])
    assert_pairs_evaluated_as_one_process(runs["cp"], runs["one"])
    status = {name: json.loads((runs[name] / "status.json").read_text()) for name in ("one", "cp")}
    assert status["cp"]["world_size"] == 2 and status["cp"]["state"] == "completed"
    for key in ("reward_mean", "reward_std"):  # from the final prediction's gathered rewards
        assert status["cp"]["reward_stats"][key] == pytest.approx(status["one"]["reward_stats"][key], abs=1e-5)


def test_each_validation_row_is_evaluated_split_and_counted_once(runs):
    for rank in (0, 1):
        calls = _spied(runs["cp-spied"], rank)
        evaluating = [c["responses"] for c in calls if c["kind"] == "split" and not c["training"]]
        # both evaluations ran every batch split on this rank: 5, 5 and 2 pairs, chosen and rejected read (one
        # group: no repeats to keep other groups in step, so none is computed; shard_over_groups)
        assert evaluating == [10, 10, 4] * 2, calls
        assert [c["rows"] for c in calls if c["kind"] == "metrics"] == [VALIDATION_ROWS] * 2
        assert sum(c["training"] for c in calls if c["kind"] == "split") == 2  # step 1's 2 micro batches
    one = _spied(runs["one-spied"], 0)
    assert [c["rows"] for c in one if c["kind"] == "metrics"] == [VALIDATION_ROWS] * 2
    assert not [c for c in one if c["kind"] == "split"]  # one process runs the whole rows


def test_the_gather_keeps_one_rank_per_group_and_drops_the_last_batch_repeats():
    """2 groups of 2 ranks, 5 rows in batches of 2 per group: the last step's group 1 batch repeats rows 0 and 1
    (accelerate's even batches), which the gather drops as gather_for_metrics would."""
    import torch

    from rmspec.train.context_parallel_run import Groups, gather_over_groups

    class Accelerator:
        def __init__(self, per_rank: list[torch.Tensor], end: bool, remainder: int):
            self.per_rank = per_rank
            self.gradient_state = type("State", (), {"end_of_dataloader": end, "remainder": remainder})()

        def gather(self, data):  # what every rank gets from accelerate: the ranks' tensors in rank order
            assert torch.equal(data, self.per_rank[0])
            return torch.cat(self.per_rank)

    groups = Groups(degree=2, count=2, index=0, group=None)
    rows = torch.arange(10.0).reshape(5, 2)  # row i's two outputs
    first = [rows[0:2], rows[0:2], rows[2:4], rows[2:4]]  # ranks 0, 1 (group 0) and 2, 3 (group 1)
    assert torch.equal(gather_over_groups(Accelerator(first, False, 1), groups, first[0]), rows[0:4])
    last = [rows[4:5].repeat(2, 1), rows[4:5].repeat(2, 1), rows[0:2], rows[0:2]]
    last[0][1] = last[1][1] = rows[0]  # group 0's short batch padded with row 0 too
    kept = gather_over_groups(Accelerator(last, True, 1), groups, last[0])
    assert torch.equal(kept, rows[4:5])


def test_the_last_batches_loss_counts_the_groups_own_rows_only():
    """13 rows in batches of 5 over 2 groups: step 1 holds rows 0-9, step 2 (the last: remainder 3) gives group 0
    rows 10-12 and 2 repeats, group 1 five repeats (dropped whole by the gather)."""
    from rmspec.train.context_parallel_run import Groups, rows_not_repeated

    def state(end: bool, remainder: int):
        return type("State", (), {"end_of_dataloader": end, "remainder": remainder})()

    group = [Groups(degree=2, count=2, index=g, group=None) for g in (0, 1)]
    assert [rows_not_repeated(state(False, 3), g, 5) for g in group] == [None, None]
    assert [rows_not_repeated(state(True, 3), g, 5) for g in group] == [3, None]
    assert [rows_not_repeated(state(True, 8), g, 5) for g in group] == [None, 3]  # 18 rows: group 0's batch full
    assert [rows_not_repeated(state(True, 0), g, 5) for g in group] == [None, None]  # no repeats
