"""The sweep loop: Optuna ask/tell in this process, `sweep.parallel` trials at once (threads, each following
its own `rmspec run` or SLURM job), one ordinary run per trial and seed, resumable, shareable.

The study lives in its storage (rmspec.sweep.storage), so a sweep killed at any point resumes from it:
finished trials stay as they are; a trial left RUNNING whose owner is gone is finished from its run
directory (waited for while its `rmspec run`, trainer or job still lives, read if it completed, resumed from
its last checkpoint, or re-run, each said so), always with the parameters the study stored for it; and the
loop goes on to the budget. One owner per trial: DIR/locks/NNN.lock (flock) is held by the sweep process
working on trial NNN, so a worker adopts a RUNNING trial only when that lock is free (its worker died).
One owner per sweep directory: DIR/.claim.lock, exclusive for a sweep alone, shared by `--join` workers.
"""

from __future__ import annotations

import fcntl
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna

from rmspec.errors import RmspecError
from rmspec.rundir import RunDir, atomic_write_json, last_complete_checkpoint, read_json, read_status
from rmspec.rundir.lock import Lock, RunLocked, claim_lock, owner_record
from rmspec.spec import LoadedSpec, load_spec
from rmspec.spec.sweep_rules import pruner_metric
from rmspec.sweep import outputs, space, storage
from rmspec.sweep.budget import trial_estimate
from rmspec.sweep.devices import DevicePool, Grant
from rmspec.sweep.layout import SweepDir
from rmspec.sweep.live import SweepView
from rmspec.sweep.owners import live_owner
from rmspec.sweep.state import Sweep
from rmspec.sweep.trial import RunOutcome, RunRequest, Start, check_request, outcome_of, run_once, trial_sets

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
RUNNING = (optuna.trial.TrialState.RUNNING,)
# A shared study: a trial another worker asked this recently may not hold its lock yet (ask, then flock).
ADOPT_AFTER_SECONDS = 5.0
IDLE_SECONDS = 0.5


# ------------------------------------------------------------------ opening a sweep


def start(spec_file: str, sets: tuple[str, ...], out: str | None, join: bool = False) -> tuple[Sweep, Any]:
    """A new sweep in DIR; with `join`, the sweep in DIR when one was started there (created if not)."""
    loaded = load_spec(spec_file, sets)
    sweep = loaded.spec.sweep
    if sweep is None:
        raise RmspecError(
            f"{spec_file} has no sweep: section",
            hint="add one (`rmspec schema` lists the sweep section's fields), or train it with `rmspec run`",
        )
    check_objective(loaded)
    root = Path(out or sweep.dir.format(name=loaded.spec.name))
    folder = SweepDir(root)
    if join and not storage.is_shared(sweep.storage):
        raise RmspecError(
            "--join shares the study between sweep processes; sweep.storage sqlite is for one process only "
            "(SQLite under several writers fails with 'database is locked')",
            hint="write sweep.storage: journal (a shared file system) or an RDB URL, e.g. --set sweep.storage=journal",
        )
    if not join:
        lock = _claim(folder, shared=False)
        if folder.is_sweep():
            lock.release()
            raise RmspecError(f"{root} already holds a sweep", hint=f"continue it with `rmspec sweep --resume {root}`")
        study = _create(folder, loaded, spec_file, sets, joined=False)
        return _sweep(loaded, sets, folder, study, joined=False), lock
    lock = _claim(folder, shared=True)
    try:
        with _held(folder.create_lock):  # one worker creates; the others wait for it, then join
            if folder.is_sweep():
                record = read_json(folder.sweep_json)
                if not record.get("joined"):
                    raise RmspecError(
                        f"{root} holds a sweep started without --join", hint=f"rmspec sweep --resume {root}"
                    )
                _same_spec(record, loaded)
                study = _study(folder, loaded, create=False, salt=_worker())
            else:
                study = _create(folder, loaded, spec_file, sets, joined=True, salt=_worker())
    except BaseException:
        lock.release()
        raise
    return _sweep(loaded, sets, folder, study, joined=True), lock


def resume(root: str) -> tuple[Sweep, Any]:
    folder = SweepDir(Path(root))
    if not folder.is_sweep():
        raise RmspecError(f"{root} holds no sweep (no sweep.json)", hint="give the directory rmspec sweep wrote (-o)")
    record = read_json(folder.sweep_json) if folder.sweep_json.exists() else {}
    joined = bool(record.get("joined"))
    lock = _claim(folder, shared=joined)  # a joined sweep resumes as one more worker
    try:
        loaded = load_spec(record["spec_path"], tuple(record.get("sets") or ()))
        _same_spec(record, loaded)
        study = _study(folder, loaded, create=False, salt=_worker())  # not the sequence the stopped sweep drew
    except BaseException:
        lock.release()
        raise
    return _sweep(loaded, tuple(record.get("sets") or ()), folder, study, joined=joined), lock


def _sweep(loaded: LoadedSpec, sets: tuple[str, ...], folder: SweepDir, study: optuna.Study, joined: bool) -> Sweep:
    spec = loaded.spec.sweep
    assert spec is not None
    view = SweepView(loaded.spec.name, spec)
    return Sweep(loaded, sets, folder, study, view, storage=spec.storage, joined=joined)


def _create(
    folder: SweepDir, loaded: LoadedSpec, spec_file: str, sets: tuple[str, ...], joined: bool, salt: str | None = None
) -> optuna.Study:
    sweep = loaded.spec.sweep
    assert sweep is not None
    folder.root.mkdir(parents=True, exist_ok=True)
    study = _study(folder, loaded, create=True, salt=salt)
    for values in sweep.first_trials:
        study.enqueue_trial(values)
    # written last: a sweep.json names a study that exists (a worker killed before this leaves no sweep)
    atomic_write_json(
        folder.sweep_json,
        {
            "spec_path": str(Path(spec_file).resolve()),
            "sets": list(sets),
            "spec_hash": loaded.spec_hash,
            "study_name": loaded.spec.name,
            "storage_kind": sweep.storage,
            "storage": storage.location(folder, sweep.storage),
            "joined": joined,
        },
    )
    return study


def _same_spec(record: dict[str, Any], loaded: LoadedSpec) -> None:
    if loaded.spec_hash != record.get("spec_hash"):
        raise RmspecError(
            f"{record.get('spec_path')} (with its --set) differs from the sweep's: its trials would not be comparable",
            hint="give the spec and --set the sweep started with, or start a new sweep in another directory (-o)",
        )


def check_objective(loaded: LoadedSpec) -> None:
    """validation.metrics.NAME must be a metric the approach's evaluation writes (its registry entry)."""
    from rmspec import approaches

    sweep = loaded.spec.sweep
    assert sweep is not None
    parts = sweep.objective.metric.split(".")
    if parts[:2] != ["validation", "metrics"]:
        return
    names = approaches.of(loaded.spec).validation_metric_names(loaded.spec.approach)
    if len(parts) != 3 or parts[2] not in names:
        raise RmspecError(
            f"sweep.objective.metric {sweep.objective.metric!r}: approach {loaded.spec.approach.kind}'s validation "
            f"writes metrics {', '.join(names) or '(none)'}",
            hint=f"use one of: {', '.join(f'validation.metrics.{n}' for n in names) or 'validation.overall'}",
        )


class SharedLock(Lock):
    """The sweep directory's claim lock taken shared: --join workers hold it together, a sweep alone cannot."""

    def try_acquire(self, record: dict | None = None) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self.fd = fd
        return True


def _claim(folder: SweepDir, shared: bool) -> Lock:
    if shared:
        lock = SharedLock(folder.root / ".claim.lock")
        if not lock.try_acquire():
            raise RunLocked(
                f"{folder.root} is in use by a sweep started without --join: one sweep directory has one owner",
                hint=f"wait for it to end, or stop it and then `rmspec sweep --resume {folder.root}`",
            )
        return lock
    try:
        return claim_lock(folder.root, "rmspec sweep")
    except RunLocked as exc:
        raise RunLocked(
            exc.message.replace("one run directory", "one sweep directory"),
            hint=f"wait for it to end, or stop it and then `rmspec sweep --resume {folder.root}`"
            " (workers sharing a study: rmspec sweep SPEC -o DIR --join)",
        ) from None


class _held:
    """A blocking exclusive flock for a short critical section (creating the study)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)


def _study(folder: SweepDir, loaded: LoadedSpec, create: bool, salt: str | None = None) -> optuna.Study:
    sweep = loaded.spec.sweep
    assert sweep is not None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    where = storage.open_storage(folder, sweep.storage)
    sampler, pruner = space.sampler_of(sweep, salt), space.pruner_of(sweep)
    name = loaded.spec.name
    if create:
        direction = sweep.objective.direction
        return optuna.create_study(study_name=name, storage=where, sampler=sampler, pruner=pruner, direction=direction)
    return optuna.load_study(study_name=name, storage=where, sampler=sampler, pruner=pruner)


# ------------------------------------------------------------------ the loop


class Workers:
    """The trials this process runs at once: their threads, their `rmspec run` children, the device pool."""

    def __init__(self, sweep: Sweep):
        parallel = sweep.spec.parallel
        local_parallel = parallel > 1 and sweep.spec.slurm is None
        self.pool = DevicePool(parallel) if local_parallel else None
        self.threads: dict[int, threading.Thread] = {}
        self.children: dict[int, subprocess.Popen] = {}
        self.jobs: dict[int, str] = {}
        self.errors: list[BaseException] = []
        self.interrupted: list[int] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.said_timeout = False

    def busy(self) -> int:
        with self.lock:
            for number in [n for n, t in self.threads.items() if not t.is_alive()]:
                self.threads.pop(number).join()
            return len(self.threads)

    def start(self, number: int, target: Any) -> None:
        def body() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 - carried to the main thread, which raises it
                self.errors.append(exc)

        thread = threading.Thread(target=body, name=f"trial-{number}", daemon=True)
        with self.lock:
            self.threads[number] = thread
        thread.start()

    def interrupt(self) -> None:
        """Ctrl-C: each run saves a checkpoint and stops (its `rmspec run` forwards SIGINT to its trainer)."""
        self.stopping.set()
        with self.lock:
            children, jobs = list(self.children.values()), list(self.jobs.values())
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        if jobs:
            from rmspec.sweep.jobs import cancel

            for job in jobs:  # scancel: the job's `rmspec run` is told SIGTERM and saves a checkpoint
                cancel(job)


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
                        workers.start(handle.number, lambda h=handle, k=lock: _work(sweep, workers, h, k, True))
                        continue
                    if _may_ask(sweep, workers, began):
                        asked = _ask(sweep)
                        if asked is not None:
                            handle, lock = asked
                            workers.start(handle.number, lambda h=handle, k=lock: _work(sweep, workers, h, k, False))
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
        trial.set_user_attr("worker", _worker())
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
                handle.set_user_attr("adopted_by", _worker())  # "worker" stays the one that asked for it
            return handle, lock
    return None


def _worker() -> str:
    return f"{owner_record('rmspec sweep')['host']}:{os.getpid()}"


def _work(sweep: Sweep, workers: Workers, trial: optuna.Trial, lock: Lock, adopted: bool) -> None:
    """One trial, start to tell: its values from the study, each seed's run, the outcome told."""
    number = trial.number
    try:
        with sweep.guard:
            # The trial's values always come from its stored parameters: Optuna's suggest returns a parameter
            # the trial already holds (a trial stopped after its suggestion resumes with it), and samples the rest.
            values = space.values_of(sweep.spec, space.suggest(trial, sweep.spec))
            trial.set_user_attr("values", values)
            sweep.view.started(number, values)
        outcomes = _runs(sweep, workers, trial, values, adopted)
        if outcomes and outcomes[-1].state == "interrupted":
            with workers.lock:
                workers.interrupted.append(number)
            workers.stopping.set()  # a run told to stop (Ctrl-C, scancel) stops the sweep, resumable
            sweep.view.note(f"trial {number} interrupted: resume with `rmspec sweep --resume {sweep.dir.root}`")
            return
        _tell(sweep, trial, outcomes)
        outputs.write_sweep_json(sweep)
    finally:
        lock.release()


def _runs(sweep: Sweep, workers: Workers, trial: optuna.Trial, values: dict, adopted: bool) -> list[RunOutcome]:
    number = trial.number
    metric = pruner_metric(sweep.loaded.spec) if sweep.spec.pruner.kind != "none" else None
    sign = 1.0 if metric is None or space.direction_of(metric) == sweep.spec.objective.direction else -1.0
    requests = _requests(sweep, number, values)
    jobs: dict[str, str] = dict(trial.user_attrs.get("slurm_jobs") or {}) if adopted else {}
    with sweep.guard:
        trial.set_user_attr("run_dirs", [str(r.run_dir) for r in requests])
        trial.set_user_attr("command", " ".join(requests[0].command()))

    def reporter(step: int, value: float) -> bool:
        with sweep.guard:
            trial.report(sign * value, step)
            return trial.should_prune()

    outcomes: list[RunOutcome] = []
    for i, request in enumerate(requests):
        if workers.stopping.is_set():
            outcomes.append(RunOutcome("interrupted"))
            break
        job = jobs.get(str(request.run_dir))
        owner = live_owner(request.run_dir, job)
        if owner is not None:
            sweep.view.note(f"trial {number}: {request.run_dir} is still run by {owner}; waiting for it to end")
            _wait_for_owner(request.run_dir, job)
        run = RunDir(request.run_dir)
        status = read_status(run)
        report = reporter if i == 0 and metric is not None else None
        if status.state == "completed":
            sweep.view.note(f"trial {number}: {run.root} completed while no sweep followed it; read as it is")
            outcomes.append(outcome_of(run, 0, sweep.spec.objective.metric, 0.0, [], request.log))
        elif status.state == "pruned":
            outcomes.append(RunOutcome("pruned", pruned_at=status.step))
        elif run.plan.exists() and last_complete_checkpoint(run.checkpoints, remove_partial=False):
            sweep.view.note(f"trial {number}: resuming {run.root} from its last checkpoint")
            outcomes.append(_launch(sweep, workers, trial, request, None, resume=True, jobs=jobs))
        else:
            if run.root.exists() and adopted:
                sweep.view.note(f"trial {number}: no checkpoint in {run.root}; re-running it from the start")
            outcomes.append(_launch(sweep, workers, trial, request, report, overwrite=run.root.exists(), jobs=jobs))
        if outcomes[-1].state != "completed":
            break
    return outcomes


def _launch(
    sweep: Sweep,
    workers: Workers,
    trial: optuna.Trial,
    request: RunRequest,
    reporter: Any,
    *,
    jobs: dict[str, str],
    resume: bool = False,
    overwrite: bool = False,
) -> RunOutcome:
    """Plan the run (a combination that does not plan fails the trial at once), then run it here or as a job."""
    number = trial.number
    error, planned = check_request(request)
    if error:
        return RunOutcome("failed", error=error)
    loaded, plan = planned
    estimate = trial_estimate(loaded.spec, plan)["seconds"]
    with sweep.guard:
        if estimate is not None and "estimated_seconds" not in trial.user_attrs:
            trial.set_user_attr("estimated_seconds", round(estimate * len(sweep.seeds), 1))
    gpus = 0 if plan.uses_cpu else plan.processes_per_node
    objective = sweep.spec.objective.metric
    metric = pruner_metric(sweep.loaded.spec) if reporter is not None else None
    if sweep.spec.slurm is not None:
        from rmspec.sweep.jobs import run_job

        def submitted(job: str) -> None:
            jobs[str(request.run_dir)] = job
            with workers.lock:
                workers.jobs[number] = job
            with sweep.guard:
                trial.set_user_attr("slurm_jobs", dict(jobs))
            sweep.view.note(f"trial {number}: SLURM job {job} for {request.run_dir}")

        several = len(sweep.seeds) > 1
        seed = request.run_dir.name.removeprefix("seed-") if several else "0"
        try:
            return run_job(
                request,
                objective,
                metric,
                reporter,
                name=f"{sweep.loaded.spec.name}-t{number:03d}" + (f"-s{seed}" if several else ""),
                slurm=sweep.spec.slurm,
                gpus=gpus,
                script=sweep.dir.job_script(number, int(seed) if seed.isdigit() else 0, several),
                on_submit=submitted,
                resume=resume,
                overwrite=overwrite,
            )
        finally:
            with workers.lock:
                workers.jobs.pop(number, None)
    grant = Grant()
    if workers.pool is not None:
        try:
            grant = workers.pool.take(gpus)
        except ValueError as exc:
            return RunOutcome("failed", error=str(exc))
    if grant.describe():
        sweep.view.note(f"trial {number}: {grant.describe()}")
        with sweep.guard:
            trial.set_user_attr("devices", grant.describe())

    def started(child: subprocess.Popen) -> None:
        with workers.lock:
            workers.children[number] = child

    try:
        start_with = Start(env=grant.environment(plan.processes_per_node), cores=grant.cores, on_start=started)
        return run_once(request, objective, metric, reporter, resume=resume, overwrite=overwrite, start=start_with)
    finally:
        with workers.lock:
            workers.children.pop(number, None)
        if workers.pool is not None:
            workers.pool.give_back(grant)


def _requests(sweep: Sweep, number: int, values: dict[str, Any]) -> list[RunRequest]:
    several = len(sweep.seeds) > 1
    out = []
    for seed in sweep.seeds:
        run_dir = sweep.dir.run_dir(number, seed or 0, several)
        name = f"{sweep.loaded.spec.name}-t{number:03d}" + (f"-s{seed}" if several else "")
        sets = trial_sets(sweep.sets, name, run_dir, seed, values)
        out.append(RunRequest(sweep.loaded.file.resolve(), sets, run_dir, sweep.dir.log(number, seed or 0, several)))
    return out


def _tell(sweep: Sweep, trial: optuna.Trial, outcomes: list[RunOutcome]) -> None:
    number = trial.number
    last = outcomes[-1]
    with sweep.guard:
        trial.set_user_attr("seconds", round(sum(o.seconds for o in outcomes), 2))
        if last.state == "pruned":
            trial.set_user_attr("pruned_at_step", last.pruned_at)
            sweep.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            sweep.view.finished(number, "pruned", None, f"at step {last.pruned_at}")
            return
        if last.state == "failed":
            trial.set_user_attr("error", (last.error or "")[-2000:])
            sweep.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            sweep.view.finished(number, "failed", None, _last_line(last.error))
            return
        seed_values = [o.value for o in outcomes if o.value is not None]
        value = statistics.fmean(seed_values)
        if len(seed_values) > 1:
            trial.set_user_attr("seed_values", seed_values)
            trial.set_user_attr("stderr", statistics.stdev(seed_values) / math.sqrt(len(seed_values)))
        sweep.study.tell(trial, value)
        sweep.view.finished(number, "completed", value, "")


def _wait_for_owner(run_dir: Path, job: str | None) -> None:
    """A `rmspec run`, trainer or job the stopped sweep left behind still owns the run: let it end first,
    then read what it really did (completed, interrupted with a checkpoint, failed)."""
    while live_owner(run_dir, job) is not None:
        time.sleep(IDLE_SECONDS)


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def exit_interrupted(sweep: Sweep) -> None:
    print(f"sweep interrupted; resume with: rmspec sweep --resume {sweep.dir.root}", file=sys.stderr)
    sys.exit(130)
