"""One owner per run directory. Killing the `rmspec run` parent leaves its trainer running; a second
`run --resume` (or --overwrite) beside it is refused with the owner's pid, host and a hint, and
`rmspec status` shows it live. After a SIGKILL of everything no stale lock remains: status shows
`stopped` with the last checkpoint, and the resume matches an uninterrupted run. A resume from a
checkpoint at max_steps trains no further step."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from helpers.models import build_model
from helpers.polling import _wait_for
from helpers.runs import make_run_spec, metrics_rows, rmspec
from rmspec.rundir.lock import LOCK_FILES, RunLocked, acquire_trainer_lock, claim_lock, trainer_owner

TRAINING = "  max_steps: 100\n  save_steps: 10\n  save_total_limit: 2"


# ------------------------------------------------------------------ the lock itself (no training)


def _hold(path: Path) -> subprocess.Popen:
    """Another process that takes the trainer lock of `path` and keeps it until killed."""
    code = (
        "import sys, time; from rmspec.rundir.lock import acquire_trainer_lock; "
        "acquire_trainer_lock(sys.argv[1]); print('held', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_shared_lock_admits_shared_holders_and_no_exclusive_one(tmp_path):
    """The sweep directory's claim as --join workers take it (rmspec.sweep.opening): shared holders
    together, never beside an exclusive one (a sweep alone), either way round. flock(2) locks belong to
    the open file, so two opens in this process conflict as two processes would."""
    from rmspec.rundir.lock import Lock

    path = tmp_path / ".claim.lock"
    first, second = Lock(path, shared=True), Lock(path, shared=True)
    assert first.try_acquire() and second.try_acquire()
    alone = Lock(path)
    assert not alone.try_acquire()
    first.release()
    assert not alone.try_acquire()
    second.release()
    assert alone.try_acquire()
    assert not Lock(path, shared=True).try_acquire()
    alone.release()


def test_the_lock_names_its_owner_and_dies_with_it(tmp_path):
    holder = _hold(tmp_path)
    try:
        owner = trainer_owner(tmp_path)
        assert owner["pid"] == holder.pid and owner["host"] == socket.gethostname()
        with pytest.raises(RunLocked) as refused:
            claim_lock(tmp_path, "rmspec run --resume")
        assert f"pid {holder.pid} on host {socket.gethostname()}" in refused.value.message
        assert f"rmspec status {tmp_path}" in refused.value.hint and f"kill {holder.pid}" in refused.value.hint
        with pytest.raises(RunLocked):
            acquire_trainer_lock(tmp_path, wait=0.3)  # a second trainer
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel dropped the lock with its holder: nothing stale, nothing to clean up.
    assert trainer_owner(tmp_path) is None
    lock = claim_lock(tmp_path, "rmspec run --resume")
    assert json.loads((tmp_path / LOCK_FILES[0]).read_text())["pid"] == os.getpid()
    lock.release()
    acquire_trainer_lock(tmp_path, wait=0).release()


# ------------------------------------------------------------------ through rmspec run


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_model("llama", tmp_path_factory.mktemp("lock") / "model-src")


def _status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.mark.slow
def test_a_live_trainer_keeps_its_run_dir_and_a_dead_one_does_not(tmp_path, model_dir):
    reference_spec = make_run_spec(tmp_path, name="reference", training=TRAINING, batch=4, model=model_dir)
    done = rmspec("run", str(reference_spec), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    reference = _status(tmp_path / "runs" / "reference")

    spec = make_run_spec(tmp_path, name="owned", training=TRAINING, batch=4, model=model_dir)
    run = tmp_path / "runs" / "owned"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}
    parent = subprocess.Popen(
        [sys.executable, "-m", "rmspec", "run", str(spec)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    trainer = None
    try:
        _wait_for(lambda: (run / "checkpoints" / "checkpoint-10" / "trainer_state.json").exists(), 240, parent)
        trainer = psutil.Process(_status(run)["pid"])
        trainer.suspend()  # alive and owning the directory, but not racing to the end of the run
        parent.send_signal(signal.SIGKILL)  # what `timeout -s KILL` or a closed terminal does to the parent
        parent.wait()
        assert trainer.is_running()

        for argv in (("run", "--resume", str(run)), ("run", str(spec), "--overwrite")):
            refused = rmspec(*argv, cwd=tmp_path)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert f"pid {trainer.pid} on host {socket.gethostname()}" in refused.stderr
            assert "rmspec status" in refused.stderr and "Traceback" not in refused.stderr
        assert (run / "checkpoints" / "checkpoint-10").exists()  # --overwrite removed nothing
        shown = rmspec("status", str(run), cwd=tmp_path)
        assert shown.returncode == 0 and "running" in shown.stdout and f"pid {trainer.pid}" in shown.stdout

        # SIGKILL everything: the trainer and the accelerate launcher above it.
        launcher = trainer.parent()
        trainer.kill()
        if launcher is not None and "accelerate" in " ".join(launcher.cmdline()):
            launcher.kill()
        trainer.wait(10)
    finally:
        if parent.poll() is None:
            parent.kill()
        if trainer is not None and trainer.is_running():
            trainer.kill()

    assert _status(run)["state"] == "running"  # what the dead trainer last wrote
    shown = rmspec("status", str(run), "--json", cwd=tmp_path)
    info = json.loads(shown.stdout)
    assert info["state"] == "stopped" and info["live"] is False and info["owner"] is None
    last = info["last_checkpoint"]
    assert last and (Path(last) / "trainer_state.json").exists()
    plain = rmspec("status", str(run), cwd=tmp_path).stdout
    assert "stopped" in plain and last in plain and f"rmspec run --resume {run}" in plain

    resumed = rmspec("run", "--resume", str(run), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = _status(run)
    assert final["state"] == "completed" and final["step"] == reference["step"] == 100
    for key, value in reference["metrics"].items():
        if key.startswith("eval/rm/"):
            assert final["metrics"][key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    assert not (run / "checkpoints" / "checkpoint-101").exists()


@pytest.mark.slow
def test_resume_from_a_checkpoint_at_max_steps_trains_no_further_step(tmp_path, model_dir):
    spec = make_run_spec(tmp_path, name="atmax", training="  max_steps: 8\n  save_steps: 4", batch=4, model=model_dir)
    run = tmp_path / "runs" / "atmax"
    done = rmspec("run", str(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    first = _status(run)
    assert (run / "checkpoints" / "checkpoint-8" / "trainer_state.json").exists()
    weights = (run / "model" / "model.safetensors").read_bytes()
    # A crash after the last checkpoint, before the run finished: status says failed, no final model.
    (run / "status.json").write_text(json.dumps({**first, "state": "failed", "error": "killed"}))
    os.rename(run / "model", tmp_path / "first-model")

    resumed = rmspec("run", "--resume", str(run), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = _status(run)
    assert final["state"] == "completed" and final["step"] == 8
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["checkpoint-4", "checkpoint-8"]
    assert max(r["step"] for r in metrics_rows(run) if "step" in r) == 8
    assert (run / "model" / "model.safetensors").read_bytes() == weights  # the step-8 weights, untouched
    for key, value in first["metrics"].items():
        if key.startswith("eval/rm/"):
            assert final["metrics"][key] == pytest.approx(value, rel=1e-6), key


def test_status_shows_a_dead_trainer_as_stopped_without_importing_torch(tmp_path):
    run = tmp_path / "runs" / "dead"
    (run / "checkpoints" / "checkpoint-6").mkdir(parents=True)
    (run / "checkpoints" / "checkpoint-6" / "trainer_state.json").write_text("{}")
    (run / "checkpoints" / "checkpoint-9").mkdir()  # killed while saving: no trainer_state.json
    (run / "plan.json").write_text("{}")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (run / "status.json").write_text(
        json.dumps({"state": "running", "pid": gone.pid, "host": socket.gethostname(), "step": 8, "max_steps": 20})
    )
    probe = (
        "import sys; from rmspec.cli.main import main; sys.argv = ['rmspec', 'status', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(run)], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr
    assert "stopped (status.json says running, but its trainer is gone)" in done.stdout
    assert str(run / "checkpoints" / "checkpoint-6") in done.stdout and "checkpoint-9" not in done.stdout
    assert f"rmspec run --resume {run}" in done.stdout
