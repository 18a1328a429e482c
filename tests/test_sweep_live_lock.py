"""One owner per trial (rmspec.sweep.driver): a worker never adopts a RUNNING trial whose lock a LIVE worker
holds (issue 52: tests/test_sweep_recovery.py kills one worker before any trial finishes, so a worker that
adopted every RUNNING trial, `lock.try_acquire(...) or True`, passed it). Here a second process asks for a
trial through the driver's own `_ask` (the study's journal storage, the trial's flock) and stays alive;
this process's `_adopt` must leave the trial alone, then take it once that worker is killed.

Cheap: no training, one optuna journal study and one child process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.ci import need

optuna = need("optuna")

from rmspec.rundir.lock import held_by  # noqa: E402
from rmspec.sweep import driver  # noqa: E402
from rmspec.sweep.layout import SweepDir  # noqa: E402
from rmspec.sweep.state import Sweep  # noqa: E402

# The live worker: opens the study as `rmspec sweep --join` does, asks for a trial with the driver's `_ask`
# (the trial and its lock, DIR/locks/NNN.lock), says so, and holds it until its stdin closes or it is killed.
WORKER = """
import sys
from pathlib import Path
import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from rmspec.sweep import driver
from rmspec.sweep.layout import SweepDir
from rmspec.sweep.state import Sweep

root = Path(sys.argv[1])
storage = JournalStorage(JournalFileBackend(str(root / "study.journal")))
study = optuna.load_study(study_name="live", storage=storage)
sweep = Sweep(loaded=None, sets=(), dir=SweepDir(root), study=study, view=None, storage="journal", joined=True)
asked = driver._ask(sweep)
assert asked is not None
print("ASKED", asked[0].number, flush=True)
sys.stdin.read()
"""


def _study(root: Path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(root / "study.journal")))
    return optuna.create_study(study_name="live", storage=storage, load_if_exists=True)


@pytest.mark.parametrize("joined", [False, True], ids=["resume", "join"])
def test_a_trial_a_live_worker_holds_is_not_adopted_until_that_worker_dies(tmp_path, monkeypatch, joined):
    root = tmp_path / "sweep"
    root.mkdir()
    study = _study(root)
    # a --join worker waits ADOPT_AFTER_SECONDS before it adopts a trial another worker just asked (the
    # moment between ask and flock); that wait is not what this test is about, so it is not waited
    monkeypatch.setattr(driver, "ADOPT_AFTER_SECONDS", 0.0)
    live = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = live.stdout.readline() if live.stdout else ""
        assert said.strip() == "ASKED 0", said + (live.stderr.read() if live.poll() is not None and live.stderr else "")
        sweep = Sweep(
            loaded=None, sets=(), dir=SweepDir(root), study=study, view=None, storage="journal", joined=joined
        )  # type: ignore[arg-type]
        workers = SimpleNamespace(lock=threading.Lock(), threads={})  # this process runs no trial yet
        assert held_by(sweep.dir.trial_lock(0))["pid"] == live.pid  # the live worker's flock, its record

        assert driver._adopt(sweep, workers) is None  # type: ignore[arg-type]
        (trial,) = study.get_trials()
        assert trial.state == optuna.trial.TrialState.RUNNING
        assert "adopted_by" not in trial.user_attrs
        assert trial.user_attrs["worker"].endswith(f":{live.pid}")
        assert held_by(sweep.dir.trial_lock(0))["pid"] == live.pid  # still the live worker's

        # the control: the same call adopts the trial once its worker is gone (the kernel drops its flock)
        live.send_signal(signal.SIGKILL)
        live.wait(timeout=30)
        end = time.monotonic() + 10
        adopted = driver._adopt(sweep, workers)  # type: ignore[arg-type]
        while adopted is None and time.monotonic() < end:
            time.sleep(0.05)
            adopted = driver._adopt(sweep, workers)  # type: ignore[arg-type]
        assert adopted is not None
        handle, lock = adopted
        try:
            assert handle.number == 0
            assert study.get_trials()[0].user_attrs["adopted_by"].endswith(f":{os.getpid()}")
            assert held_by(sweep.dir.trial_lock(0))["pid"] == os.getpid()  # the lock is this worker's now
        finally:
            lock.release()
    finally:
        if live.poll() is None:
            live.kill()
            live.wait(timeout=30)
