"""FSDP2 executed on two CPU gloo processes through rmspec's own launch path (`rmspec run plan.json` ->
`accelerate launch -m rmspec.launch.entrypoint RUN/plan.json`), with the strategy guard on.

The plan says FSDP2 (test hook: tests/helpers/fsdp_runs.py); the test-only shim
(tests/helpers/fsdp_cpu_shim.py) lets accelerate take its FSDP path on CPU. Each run trains full-batch
SGD (the whole training split per step, no clipping in effect), so a single process on the same data
is the independent reference: a sum of gradients instead of a mean, a loss scaled by the number of
processes, or ranks on different initial weights all show as a difference.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from helpers.fsdp_recorder import PROBE_IDS, PROBE_MASK
from helpers.fsdp_runs import explain, losses, plan_fsdp_on_cpu, rmspec_run, run_env, status, write_spec
from helpers.models import build_model

STEPS = 4


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("fsdp")
    return root, build_model("llama", root / "model-src")


@pytest.fixture(scope="module")
def single(base):
    """The reference: one process, no FSDP, the same spec and global batch."""
    root, model = base
    spec = write_spec(root, model, name="single", procs=1, steps=STEPS, save_steps=2)
    done = rmspec_run(str(spec), cwd=root, env=run_env(root / "rec-single", shim=False))
    run = root / "runs" / "single"
    assert done.returncode == 0, explain(done, run)
    return run, root / "rec-single"


@pytest.fixture(scope="module")
def sharded(base):
    root, model = base
    spec = write_spec(root, model, name="fsdp", steps=STEPS, save_steps=2)
    started = time.monotonic()
    done = rmspec_run(str(plan_fsdp_on_cpu(spec)), cwd=root, env=run_env(root / "rec-fsdp"))
    run = root / "runs" / "fsdp"
    assert done.returncode == 0, explain(done, run)
    assert time.monotonic() - started < 120, "an FSDP run on two CPU processes must stay under two minutes"
    return run, root / "rec-fsdp"


def test_the_run_is_fsdp2_on_two_ranks_with_every_parameter_sharded(sharded):
    run, rec = sharded
    assert status(run)["state"] == "completed" and status(run)["world_size"] == 2
    assert json.loads((run / "plan.json").read_text())["accelerate_config"]["distributed_type"] == "FSDP"
    ranks = [json.loads((rec / f"rank{r}_params.json").read_text()) for r in (0, 1)]
    assert ranks[0].keys() == ranks[1].keys() and "score.weight" in ranks[0]
    for name, fact in ranks[0].items():
        assert fact["dtensor"] and fact["mesh_size"] == 2 and fact["placements"] == ["S(0)"], (name, fact)
        # The two ranks hold disjoint halves of dim 0, together the whole parameter.
        dim0 = fact["local_shape"][0] + ranks[1][name]["local_shape"][0]
        assert dim0 == fact["global_shape"][0], name
        assert fact["local_shape"][1:] == fact["global_shape"][1:], name


def test_gradients_of_the_first_step_equal_a_single_process(sharded, single):
    got = torch.load(sharded[1] / "grads_step1.pt")
    want = torch.load(single[1] / "grads_step1.pt")
    assert got.keys() == want.keys() and len(got) > 10
    for name, grad in want.items():
        assert grad.abs().sum() > 0, name  # a frozen or disconnected parameter would pass vacuously
        torch.testing.assert_close(got[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_logged_loss_equals_the_single_process_loss(sharded, single):
    got, want = losses(sharded[0]), losses(single[0])
    assert sorted(got) == sorted(want) == list(range(1, STEPS + 1))
    for step, loss in want.items():
        assert got[step] == pytest.approx(loss, rel=1e-5, abs=1e-6), step
    assert want[STEPS] < want[1]  # it trained


def test_saved_model_reloads_in_plain_transformers_as_the_ranks_held_it(sharded, single):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    run, rec = sharded
    final = torch.load(rec / "final.pt")
    saved = load_file(run / "model" / "model.safetensors")
    assert torch.equal(saved["score.weight"].float(), final["params"]["score.weight"])
    for name, value in final["params"].items():
        assert torch.equal(saved[name].float(), value), name
    model = AutoModelForSequenceClassification.from_pretrained(run / "model").eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(PROBE_IDS), attention_mask=torch.tensor(PROBE_MASK)).logits
    torch.testing.assert_close(logits, final["logits"], rtol=1e-5, atol=1e-6)
    # and the same model as the single process trained (full-batch SGD from the same start)
    reference = load_file(single[0] / "model" / "model.safetensors")
    for name, value in reference.items():
        torch.testing.assert_close(saved[name], value, rtol=1e-4, atol=1e-5, msg=name)


def test_sigkill_then_resume_equals_the_uninterrupted_run(base, sharded):
    from safetensors.torch import load_file

    root, model = base
    spec = write_spec(root, model, name="killed", steps=STEPS, save_steps=2)
    plan = plan_fsdp_on_cpu(spec)
    run = root / "runs" / "killed"
    env = run_env(root / "rec-killed")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmspec", "run", str(plan)], cwd=root, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (run / "checkpoints" / "checkpoint-2" / "trainer_state.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint-2 before the kill"
            time.sleep(0.2)
        os.kill(status(run)["pid"], signal.SIGKILL)  # rank 0; torchrun then stops rank 1
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and not (run / "model").exists()
    resumed = rmspec_run("--resume", str(run), cwd=root, env=env)
    assert resumed.returncode == 0, explain(resumed, run)
    assert status(run)["resumed"] is True and status(run)["step"] == STEPS
    assert losses(run) == losses(sharded[0])
    want = load_file(sharded[0] / "model" / "model.safetensors")
    got = load_file(run / "model" / "model.safetensors")
    for name, value in want.items():
        assert torch.equal(got[name], value), name


def test_the_offload_plan_runs_and_saves(base, sharded):
    """fsdp_full_shard_offload through the shim. Stated: CPU has no pinned memory, so the shim gives the
    plugin CPUOffloadPolicy(pin_memory=False); pinning waits for a GPU."""
    from safetensors.torch import load_file

    root, model = base
    spec = write_spec(root, model, name="offload", steps=STEPS, save_steps=2)
    plan = plan_fsdp_on_cpu(spec, "fsdp_full_shard_offload")
    assert json.loads(plan.read_text())["accelerate_config"]["fsdp_config"]["fsdp_offload_params"] is True
    done = rmspec_run(str(plan), cwd=root, env=run_env(root / "rec-offload"))
    run = root / "runs" / "offload"
    assert done.returncode == 0, explain(done, run)  # the guard saw offload planned and running
    facts = json.loads((root / "rec-offload" / "rank1_params.json").read_text())
    assert all(f["dtensor"] and f["mesh_size"] == 2 for f in facts.values())
    assert losses(run) == pytest.approx(losses(sharded[0]), rel=1e-6)
    want = load_file(sharded[0] / "model" / "model.safetensors")
    got = load_file(run / "model" / "model.safetensors")
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-6, msg=name)
