"""Several nodes for real: the launch.slurm that `rmspec run` writes, submitted unchanged to a real
two-node SLURM cluster (tests/slurm_cluster.py), trains with world size 2 across the nodes through
`accelerate launch` and the c10d rendezvous, and equals the same spec run as 2 processes on one host.
Requeued, it resumes from its last complete checkpoint; cancelled, it says so and names the checkpoint."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.models import build_model
from helpers.runs import make_run_spec, metrics_rows

pytestmark = pytest.mark.slow
# The session fixture slurm_cluster, as a plugin: importing its name would be shadowed by each test's parameter.
pytest_plugins = ["helpers.slurm_cluster"]

# Tiny steps (a 2-layer hidden-32 Llama): 160 of them take seconds, long enough to requeue mid-run.
PARTITION, TIME_LIMIT = "rmspec", "00:10:00"  # tests/helpers/slurm_cluster.py: not the default partition
TRAINING = "  max_steps: 160\n  save_steps: 20\n  save_total_limit: 3"
VENV_BIN = str(Path(sys.executable).parent)


def _spec(tmp: Path, name: str, model: Path, *, nodes: int, training: str = TRAINING) -> Path:
    spec = make_run_spec(
        tmp, name=name, training=training, batch=8, procs=2 if nodes == 1 else 1, rows=120, model=model
    )
    if nodes > 1:  # what a real cluster asks for: a partition (not the default one) and a time limit
        hardware = f"gpus_per_node: 1, nodes: {nodes}, slurm: {{partition: {PARTITION}, time: '{TIME_LIMIT}'}}}}"
        spec.write_text(spec.read_text().replace("gpus_per_node: 1}", hardware))
    return spec


def _sbatch(script: str, cwd: Path, env: dict[str, str]) -> str:
    """`sbatch --parsable SCRIPT` as a user types it: the job id."""
    done = subprocess.run(
        ["sbatch", "--parsable", script], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _job_field(cluster, job: str, name: str) -> str:
    """A field of `scontrol show job` (kept by slurmctld for MinJobAge, 300 s, after the job ends)."""
    shown = cluster.run("scontrol", "show", "job", job).stdout
    return next(word.split("=", 1)[1] for word in shown.split() if word.startswith(name + "="))


# One thread per process everywhere: accelerate gives each node's process all the node's cores (2 for each
# "node" of this one-host cluster, 1 for each of 2 local processes), and the thread count changes the order
# of float sums enough to move scores after 300 steps by 1.6e-4 (measured). Same threads, same arithmetic.
THREADS = {"OMP_NUM_THREADS": "1"}


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1", **THREADS, **extra}


def _client_env(cluster) -> dict[str, str]:
    """A user's shell on the login node: the venv activated, offline, SLURM_CONF pointing at the cluster."""
    return _env(SLURM_CONF=str(cluster.conf), PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))


def _written(
    tmp: Path, name: str, model: Path, cluster, training: str = TRAINING
) -> tuple[Path, dict, subprocess.CompletedProcess]:
    """`rmspec run SPEC` for 2 nodes: the run directory and launch.slurm, nothing submitted."""
    env = _client_env(cluster)
    written = subprocess.run(
        [sys.executable, "-m", "rmspec", "run", str(_spec(tmp, name, model, nodes=2, training=training))],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert written.returncode == 0, written.stdout + written.stderr
    return tmp / "runs" / name, env, written


def _status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _wait_for(predicate, timeout: float, what: str, cluster) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}\n{cluster.logs()}")


def _stop_workers(job: str) -> list[int]:
    """SIGSTOP the job's training processes (both "nodes" live on this host): those torch elastic
    started, found by the SLURM_JOB_ID and LOCAL_RANK in their environment."""
    stopped = []
    for entry in Path("/proc").iterdir():
        try:
            environ = set((entry / "environ").read_bytes().split(b"\0")) if entry.name.isdigit() else set()
        except OSError:  # gone, or not ours to read
            continue
        if f"SLURM_JOB_ID={job}".encode() in environ and any(v.startswith(b"LOCAL_RANK=") for v in environ):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGSTOP)
                stopped.append(int(entry.name))
    assert len(stopped) >= 2, f"expected a worker on each node of job {job}, found {stopped}"
    return stopped


def _scores(model_dir: Path, texts: list[str]) -> list[float]:
    """Plain transformers, no rmspec: the saved model and tokenizer as any user would load them."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return [model(**tokenizer(text, return_tensors="pt")).logits[0, 0].item() for text in texts]


def _texts(tmp: Path) -> list[str]:
    rows = [json.loads(line) for line in (tmp / "pairs.jsonl").read_text().splitlines()[:6]]
    return [f"{r['prompt']} {r[key]}" for r in rows for key in ("chosen", "rejected")]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slurm-train")
    return tmp, build_model("llama", tmp / "model-src")


@pytest.fixture(scope="module")
def reference(work):
    """The same spec as 2 processes on one host, uninterrupted."""
    tmp, model = work
    spec = _spec(tmp, "local2", model, nodes=1)
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "run", str(spec)],
        cwd=tmp,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    run = tmp / "runs" / "local2"
    assert done.returncode == 0, done.stdout + done.stderr + (run / "train.log").read_text()
    print(f"\nlocal 2-process reference: {time.time() - started:.1f} s")
    return run


def test_launch_slurm_submitted_unchanged_trains_on_two_nodes(work, reference, slurm_cluster):
    tmp, model = work
    run, env, written = _written(tmp, "nodes2", model, slurm_cluster)
    script = run / "launch.slurm"
    assert f"sbatch {script}" in written.stdout and "--submit" in written.stdout
    text = script.read_text()
    assert "--gpus-per-node" not in text  # a CPU plan asks for no GPU
    assert f"#SBATCH --partition={PARTITION}\n" in text and f"#SBATCH --time={TIME_LIMIT}\n" in text
    assert json.loads((run / "plan.json").read_text())["slurm_script"] == text

    started = time.time()
    job = _sbatch(str(script), tmp, env)
    try:
        final = slurm_cluster.wait_job(job, timeout=300)
    finally:
        slurm_cluster.run("scancel", job, check=False)
    print(f"\nSLURM 2-node job {job}: {time.time() - started:.1f} s from sbatch to the end ({final or 'gone'})")
    # The cluster took the spec's partition and time limit (the default partition is another, unlimited).
    assert _job_field(slurm_cluster, job, "Partition") == PARTITION
    assert _job_field(slurm_cluster, job, "TimeLimit") == TIME_LIMIT
    output = (run / f"slurm-{job}.out").read_text()
    status = _status(run)
    assert status.get("state") == "completed", output[-3000:]
    assert "on n[1-2], rendezvous 127.0.0.1:29500" in output  # the head's NodeAddr, not the name n1
    assert status["world_size"] == 2 and status["slurm_job_id"] == job
    assert status["step"] == 160 and status["global_batch_size"] == 8
    assert status["micro_batch_size"] * status["gradient_accumulation_steps"] * 2 == 8
    # One train_begin (rank 0 alone writes the shared files) and every logged row at the global batch.
    rows = metrics_rows(run)
    assert sum(r.get("event") == "train_begin" for r in rows) == 1
    assert [r["step"] for r in rows if "train/rm/loss" in r][:3] == [1, 2, 4]
    timed = [r for r in rows if "samples_per_second" in r]
    assert timed and all(r["samples_per_second"] * r["seconds_per_step"] == pytest.approx(8) for r in timed)
    # Batch metrics are reduced over both nodes: the curve is the 2-local-process one, step for step.
    local = {r["step"]: r for r in metrics_rows(reference) if "train/rm/loss" in r}
    for row in (r for r in rows if "train/rm/loss" in r):
        assert row["train/rm/loss"] == pytest.approx(local[row["step"]]["train/rm/loss"], rel=1e-3, abs=1e-5)

    texts = _texts(tmp)
    two_nodes, one_host = _scores(run / "model", texts), _scores(reference / "model", texts)
    assert two_nodes == pytest.approx(one_host, abs=1e-4)
    assert _scores(model, texts[:1]) != pytest.approx(two_nodes[:1], abs=1e-2)  # it trained
    ref = json.loads((reference / "status.json").read_text())["metrics"]
    assert status["metrics"]["eval/rm/accuracy"] == pytest.approx(ref["eval/rm/accuracy"], abs=1e-4)

    shown = subprocess.run(
        [sys.executable, "-m", "rmspec", "status", str(run)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "completed" in shown.stdout and f"{job}: COMPLETED" in shown.stdout


def test_requeue_resumes_from_the_last_checkpoint_and_submit_follows_it(work, reference, slurm_cluster):
    tmp, model = work
    spec = _spec(tmp, "requeued", model, nodes=2)
    run = tmp / "runs" / "requeued"
    env = _client_env(slurm_cluster)
    env["PATH"] = os.environ.get("PATH", "")  # --submit finds this venv's accelerate by itself
    started = time.time()
    parent = subprocess.Popen(
        [sys.executable, "-m", "rmspec", "run", str(spec), "--submit"],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    job, stopped = None, []
    try:
        _wait_for(lambda: _status(run).get("slurm_job_id"), 60, "the submitted job id", slurm_cluster)
        job = _status(run)["slurm_job_id"]
        _wait_for(
            lambda: (run / "checkpoints" / "checkpoint-40" / "trainer_state.json").exists(),
            240,
            "checkpoint-40",
            slurm_cluster,
        )
        assert _status(run)["state"] == "running"
        # The workers are stopped first: on a fast CI machine the 120 steps left ran out (in about a second)
        # before the requeue's SIGTERM came, and the job resumed from checkpoint-160. slurmd sends every
        # process of the job SIGCONT and then SIGTERM, so the requeue lands mid-run. (`scontrol suspend`
        # would not do: slurmd SIGKILLs a suspended job instead of terminating it nicely.)
        stopped = _stop_workers(job)
        slurm_cluster.run("scontrol", "requeue", job)
        out, _ = parent.communicate(timeout=400)
    finally:
        for pid in stopped:  # were slurmd's SIGCONT lost, nothing is left stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if parent.poll() is None:
            parent.kill()
        if job:
            slurm_cluster.run("scancel", job, check=False)
    print(f"\nrequeued SLURM job {job}: {time.time() - started:.1f} s from --submit to the end")
    assert parent.returncode == 0, out[-4000:]
    assert f"submitted SLURM job {job}" in out
    status = _status(run)
    assert status["state"] == "completed" and status["slurm_restart_count"] == 1
    assert status["resumed"] is True
    resumed_from = int(Path(status["resumed_from"]).name.rsplit("-", 1)[1])
    assert 40 <= resumed_from < 160
    # The requeued job started over and resumed: two job starts in the appended output.
    assert (run / f"slurm-{job}.out").read_text().count(f"rmspec: job {job} (restart") == 2

    ref = json.loads((reference / "status.json").read_text())
    assert status["step"] == ref["step"] == 160
    for key, value in ref["metrics"].items():
        if key.startswith("eval/rm/"):
            assert status["metrics"][key] == pytest.approx(value, abs=1e-3), key
    rows = [r for r in metrics_rows(run) if "train/rm/loss" in r]
    assert len({r["step"] for r in rows}) == len(rows)  # no step logged twice across the requeue


def test_scancel_leaves_interrupted_with_the_last_checkpoint(work, slurm_cluster):
    tmp, model = work
    # far more steps than the run lives: on a loaded host the 160 tiny steps of TRAINING ran out between
    # checkpoint-20 and the cancel (the run completed, 44 s after sbatch, in a full-suite run)
    run, env, _ = _written(tmp, "cancelled", model, slurm_cluster, TRAINING.replace("160", "5000"))
    started = time.time()
    job = _sbatch(str(run / "launch.slurm"), tmp, env)
    try:
        _wait_for(
            lambda: (run / "checkpoints" / "checkpoint-20" / "trainer_state.json").exists(),
            240,
            "checkpoint-20",
            slurm_cluster,
        )
        slurm_cluster.run("scancel", job)
        slurm_cluster.wait_job(job, timeout=60)
    finally:
        slurm_cluster.run("scancel", job, check=False)
    print(f"\ncancelled SLURM job {job}: {time.time() - started:.1f} s")
    status = _status(run)
    assert status["state"] == "interrupted", (run / f"slurm-{job}.out").read_text()[-3000:]
    checkpoint = Path(status["checkpoint"])
    assert checkpoint.name == f"checkpoint-{status['step']}" and (checkpoint / "trainer_state.json").exists()
    assert status["step"] < 5000 and not (run / "model").exists()

    shown = subprocess.run(
        [sys.executable, "-m", "rmspec", "status", str(run)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "interrupted" in shown.stdout and str(checkpoint) in shown.stdout
    assert f"rmspec run --resume {run} --submit" in shown.stdout


def test_sbatch_environment_variables_fill_what_the_spec_leaves_out(work, slurm_cluster):
    """The SBATCH_* alternative (docs/several_nodes.md): a script without a partition or a time limit takes
    them from SBATCH_PARTITION and SBATCH_TIMELIMIT at submission."""
    tmp, model = work
    spec = _spec(tmp, "from-env", model, nodes=2)
    spec.write_text(spec.read_text().replace(f", slurm: {{partition: {PARTITION}, time: '{TIME_LIMIT}'}}", ""))
    env = _client_env(slurm_cluster)
    written = subprocess.run(
        [sys.executable, "-m", "rmspec", "run", str(spec)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert written.returncode == 0, written.stdout + written.stderr
    script = tmp / "runs" / "from-env" / "launch.slurm"
    assert "--partition" not in script.read_text() and "--time" not in script.read_text()
    # Submitted held (it never runs): the job the controller holds carries what the environment gave.
    submit_env = {**env, "SBATCH_PARTITION": PARTITION, "SBATCH_TIMELIMIT": "00:05:00"}
    job = subprocess.run(
        ["sbatch", "--parsable", "--hold", str(script)], cwd=tmp, env=submit_env, capture_output=True, text=True
    )
    assert job.returncode == 0, job.stdout + job.stderr
    job_id = job.stdout.strip()
    try:
        assert _job_field(slurm_cluster, job_id, "Partition") == PARTITION
        assert _job_field(slurm_cluster, job_id, "TimeLimit") == "00:05:00"
    finally:
        slurm_cluster.run("scancel", job_id, check=False)


def test_hybrid_shard_on_two_nodes_trains_as_one_process(work, slurm_cluster):
    """fsdp_hybrid_shard (HSDP) through launch.slurm on the two nodes, 2 processes each, each row split over a
    node's 2 processes (context_parallel 2): FSDP2's mesh is 2 nodes x 2 shards, built by accelerate on every node
    from the run's accelerate_config.yaml, and the first step's gradients and the losses are one process's.
    The planner refuses FSDP on CPU, so the plan comes from the FSDP test hook and the job's processes take the
    test-only shim (tests/helpers/fsdp_cpu_shim.py) from the submitting environment, as sbatch exports it."""
    import torch

    from helpers.fsdp_cpu_shim import child_env
    from helpers.fsdp_runs import losses, plan_fsdp_on_cpu, rmspec_run, run_env, write_spec

    tmp, model = work
    root = tmp / "hsdp"
    root.mkdir()
    single = write_spec(root, model, name="single", procs=1, packing="shared_prefix")
    done = rmspec_run(str(single), cwd=root, env=run_env(root / "rec-single", shim=False))
    assert done.returncode == 0, done.stdout + done.stderr
    spec = write_spec(root, model, name="hsdp", procs=2, packing="shared_prefix", context_parallel=2)
    nodes = f"gpus_per_node: 2, nodes: 2, slurm: {{partition: {PARTITION}, time: '{TIME_LIMIT}'}},"
    spec.write_text(spec.read_text().replace("gpus_per_node: 2,", nodes))
    env = {**_client_env(slurm_cluster), **child_env(root / "rec-hsdp")}
    written = rmspec_run(str(plan_fsdp_on_cpu(spec, "fsdp_hybrid_shard")), cwd=root, env=env)
    assert written.returncode == 0, written.stdout + written.stderr
    run = root / "runs" / "hsdp"
    config = (run / "accelerate_config.yaml").read_text()
    assert "parallelism_config_dp_replicate_size: 2" in config and "parallelism_config_dp_shard_size: 2" in config

    started = time.time()
    job = _sbatch(str(run / "launch.slurm"), root, env)
    try:
        final = slurm_cluster.wait_job(job, timeout=300)
    finally:
        slurm_cluster.run("scancel", job, check=False)
    print(f"\nSLURM 2-node HSDP job {job}: {time.time() - started:.1f} s from sbatch to the end ({final or 'gone'})")
    output = (run / f"slurm-{job}.out").read_text()
    status = _status(run)
    assert status.get("state") == "completed", output[-4000:]
    assert status["world_size"] == 4 and status["slurm_job_id"] == job

    facts = json.loads((root / "rec-hsdp" / "rank0_params.json").read_text())
    assert facts and all(f["mesh_shape"] == [2, 2] and f["placements"] == ["R", "S(0)"] for f in facts.values())
    got, want = torch.load(root / "rec-hsdp" / "grads_step1.pt"), torch.load(root / "rec-single" / "grads_step1.pt")
    assert got.keys() == want.keys() and want
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-5, atol=1e-6, msg=name)
    want_losses = losses(root / "runs" / "single")
    assert losses(run) == pytest.approx(want_losses, rel=1e-5, abs=1e-6) and len(want_losses) == 2
