"""The sweep loop: Optuna ask/tell in this process, `sweep.parallel` trials at once (threads, each following
its own `rmspec run` or SLURM job), to the budget (trials, timeout, or the grid's end).

The study lives in its storage (rmspec.sweep.storage), so a sweep killed at any point resumes from it
(rmspec.sweep.opening reopens it): a trial left RUNNING whose owner is gone is adopted and finished from its
run directory (rmspec.sweep.trial_runs), always with the parameters the study stored for it, and the loop
goes on to the budget. One owner per trial: DIR/locks/NNN.lock (flock) is held by the sweep process working
on trial NNN, so a worker adopts a RUNNING trial only when that lock is free (its worker died).
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from datetime import datetime

import optuna

from rmspec.rundir.lock import Lock, owner_record
from rmspec.sweep import space
from rmspec.sweep.state import Sweep
from rmspec.sweep.trial_runs import work
from rmspec.sweep.workers import IDLE_SECONDS, Workers, worker_name

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
RUNNING = (optuna.trial.TrialState.RUNNING,)
# A shared study: a trial another worker asked this recently may not hold its lock yet (ask, then flock).
ADOPT_AFTER_SECONDS = 5.0


def run_sweep(sweep: Sweep) -> None:
    """Finish the trials whose owner is gone, then ask/tell to the budget (trials, timeout, or the grid's end),
    `sweep.parallel` at a time; return when every trial of the budget is finished (by any worker)."""
    began = time.monotonic()
    workers = Workers(sweep)
    with sweep.view:
        try:
            while True:
                if workers.errors:
                    raise workers.errors[0]
                if workers.busy() < sweep.spec.parallel and not workers.stopping.is_set():
                    adopted = _adopt(sweep, workers)
                    if adopted is not None:
                        handle, lock = adopted
                        workers.start(handle.number, lambda h=handle, k=lock: work(sweep, workers, h, k, True))
                        continue
                    if _may_ask(sweep, workers, began):
                        asked = _ask(sweep)
                        if asked is not None:
                            handle, lock = asked
                            workers.start(handle.number, lambda h=handle, k=lock: work(sweep, workers, h, k, False))
                        continue
                if workers.busy() == 0 and not _running(sweep):
                    break
                time.sleep(IDLE_SECONDS)
        except KeyboardInterrupt:
            workers.interrupt()
            _wait_all(workers)
            raise
    if workers.errors:
        raise workers.errors[0]
    if workers.interrupted:
        raise KeyboardInterrupt


def _wait_all(workers: Workers) -> None:
    while workers.busy():
        try:
            time.sleep(IDLE_SECONDS)
        except KeyboardInterrupt:  # a second Ctrl-C: stop the runs at once (their checkpoints so far stay)
            with workers.lock:
                children = list(workers.children.values())
            for child in children:
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGTERM)


def _trials(sweep: Sweep, states: tuple) -> list[optuna.trial.FrozenTrial]:
    with sweep.guard:
        return sweep.study.get_trials(deepcopy=False, states=states)


def _running(sweep: Sweep) -> list[optuna.trial.FrozenTrial]:
    return _trials(sweep, RUNNING)


def _may_ask(sweep: Sweep, workers: Workers, began: float) -> bool:
    if sweep.spec.timeout is not None and time.monotonic() - began > sweep.spec.timeout:
        if not workers.said_timeout:
            sweep.view.note(f"timeout: {sweep.spec.timeout:g} s passed, no new trial starts")
            workers.said_timeout = True
        return False
    with sweep.guard:
        taken = len(sweep.study.get_trials(deepcopy=False, states=(*FINISHED, *RUNNING)))
    return taken < _budget(sweep)


def _budget(sweep: Sweep) -> int:
    if sweep.spec.sampler.kind == "grid":
        return min(sweep.spec.trials, math.prod(len(v) for v in space.grid_points(sweep.spec).values()))
    return sweep.spec.trials


def _ask(sweep: Sweep) -> tuple[optuna.Trial, Lock] | None:
    """A new trial of the study, owned by this process from the moment it exists (its lock)."""
    with sweep.guard:
        trial = sweep.study.ask()
        lock = Lock(sweep.dir.trial_lock(trial.number))
        if not lock.try_acquire(owner_record("rmspec sweep")):
            return None  # another worker took it for an orphan in that instant: it runs it
        trial.set_user_attr("worker", worker_name())
        return trial, lock


def _adopt(sweep: Sweep, workers: Workers) -> tuple[optuna.Trial, Lock] | None:
    """A RUNNING trial whose worker is gone (its lock is free), now this process's."""
    with workers.lock:
        mine = set(workers.threads)
    now = datetime.now()
    for frozen in _running(sweep):
        if frozen.number in mine:
            continue
        if (
            sweep.joined
            and frozen.datetime_start
            and (now - frozen.datetime_start).total_seconds() < ADOPT_AFTER_SECONDS
        ):
            continue
        lock = Lock(sweep.dir.trial_lock(frozen.number))
        if lock.try_acquire(owner_record("rmspec sweep")):
            with sweep.guard:
                # Optuna's handle on a stored trial (its id is the storage's key): attributes and tell go through it
                handle = optuna.trial.Trial(sweep.study, frozen._trial_id)
                handle.set_user_attr("adopted_by", worker_name())  # "worker" stays the one that asked for it
            return handle, lock
    return None


def exit_interrupted(sweep: Sweep) -> None:
    print(f"sweep interrupted; resume with: rmspec sweep --resume {sweep.dir.root}", file=sys.stderr)
    sys.exit(130)
