"""One run of a trial: an ordinary `rmspec run SPEC --set ...` in a subprocess, in DIR/trials/NNN, with its
own plan and lock, followed through its metrics.jsonl so that the pruner can stop it.

Why a subprocess of `rmspec run` and not the launcher called here: the run is then exactly what a user
gets from the command the sweep prints (it can be re-run alone), and a sweep killed mid-trial leaves a
run directory that `rmspec run --resume` understands. The spec is loaded and planned here first, so a
combination that does not validate or plan fails the trial at once, carrying the error.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.rundir import RunDir, read_json, read_status, write_status
from rmspec.sweep.objective import metric_at

POLL_SECONDS = 0.25
# Called with (step, value) for each validation of the run; True stops it (the trial is pruned).
Reporter = Callable[[int, float], bool]


@dataclass(frozen=True)
class RunRequest:
    """What one run of a trial is: the sweep's spec file with these overrides, in this directory."""

    spec_path: Path
    sets: tuple[str, ...]  # the --set overrides (the sweep's own, then the trial's)
    run_dir: Path
    log: Path

    def command(self, resume: bool = False, overwrite: bool = False) -> list[str]:
        if resume:
            return ["rmspec", "run", "--resume", str(self.run_dir)]
        sets = [arg for expr in self.sets for arg in ("--set", expr)]
        return ["rmspec", "run", str(self.spec_path), *sets, *(["--overwrite"] if overwrite else [])]


@dataclass
class RunOutcome:
    state: str  # completed, pruned, failed, interrupted
    value: float | None = None
    error: str | None = None
    pruned_at: int | None = None
    seconds: float = 0.0
    steps: list[tuple[int, float]] = field(default_factory=list)  # (step, reported value)


def trial_sets(base_sets: tuple[str, ...], name: str, run_dir: Path, seed: int | None, values: dict) -> tuple:
    """The --set overrides of one run: the sweep's own sets, then what the sweep owns, then the trial's values."""
    owned = ["sweep=null", f"name={name}", f"output.dir={json.dumps(str(run_dir))}"]
    if seed is not None:
        owned.append(f"training.seed={seed}")
    return (*base_sets, *owned, *(f"{path}={json.dumps(value)}" for path, value in values.items()))


def check_request(request: RunRequest) -> tuple[str | None, Any]:
    """Load and plan the run as `rmspec run` will: (the error, None) or (None, (loaded spec, plan))."""
    from rmspec.plan import compile_plan
    from rmspec.spec import load_spec

    try:
        loaded = load_spec(request.spec_path, request.sets)
        plan = compile_plan(loaded, sets=list(request.sets))
    except RmspecError as exc:
        return exc.render_plain(), None
    return None, (loaded, plan)


@dataclass
class Start:
    """How a run's process starts: extra environment (its devices), the cores it is pinned to, and a callback
    that gets the child (so that Ctrl-C of the sweep reaches it: it runs in a session of its own)."""

    env: dict[str, str] = field(default_factory=dict)
    cores: list[int] = field(default_factory=list)
    on_start: Callable[[subprocess.Popen], None] | None = None


def run_once(
    request: RunRequest,
    objective: str,
    report_metric: str | None,
    reporter: Reporter | None,
    resume: bool = False,
    overwrite: bool = False,
    start: Start | None = None,
) -> RunOutcome:
    """Run it to the end (or until the reporter says prune) and read the objective from results.json.

    The run gets a session of its own: a sweep killed (even its whole process group) leaves it training to
    its end, and the resume waits for it (rmspec.sweep.owners) instead of losing or repeating it."""
    start = start or Start()
    began = time.monotonic()
    request.log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NO_COLOR": "1", **start.env}
    argv = [sys.executable, "-m", "rmspec", *request.command(resume, overwrite)[1:]]
    with request.log.open("a", encoding="utf-8") as log:
        log.write("$ " + shlex.join(request.command(resume, overwrite)) + "\n")
        log.flush()
        child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        if start.cores and hasattr(os, "sched_setaffinity"):
            # before the child starts the launcher (its imports take seconds): every process below inherits it
            os.sched_setaffinity(child.pid, start.cores)
        if start.on_start is not None:
            start.on_start(child)
        follower = MetricsFollower(RunDir(request.run_dir), report_metric)
        pruned_at = None
        while child.poll() is None:
            time.sleep(POLL_SECONDS)
            if reporter is None or pruned_at is not None:
                continue
            pruned_at = prune_step(follower, reporter)
            if pruned_at is not None:
                stop_trainer(RunDir(request.run_dir))
        code = child.wait()
    seconds = time.monotonic() - began
    run = RunDir(request.run_dir)
    pruned = pruned_outcome(run, pruned_at, report_metric, seconds, follower.seen)
    return pruned or outcome_of(run, code, objective, seconds, follower.seen, request.log)


def prune_step(follower: MetricsFollower, reporter: Reporter) -> int | None:
    """The first step of the run's new reported values at which the pruner says stop, or None."""
    for step, value in follower.new_values():
        if reporter(step, value):
            return step
    return None


def pruned_outcome(
    run: RunDir, pruned_at: int | None, report_metric: str | None, seconds: float, steps: list
) -> RunOutcome | None:
    """A run told to stop at `pruned_at`, recorded as pruned in its status; None when it was not told to, or
    when it completed before the stop reached it."""
    if pruned_at is None or read_status(run).state == "completed":
        return None
    write_status(run, "pruned", step=pruned_at, pruned_at_step=pruned_at, pruned_metric=report_metric)
    return RunOutcome("pruned", pruned_at=pruned_at, seconds=seconds, steps=steps)


def outcome_of(run: RunDir, code: int, objective: str, seconds: float, steps: list, log: Path) -> RunOutcome:
    status = read_status(run)
    if status.state == "interrupted":
        return RunOutcome("interrupted", error=f"interrupted at step {status.step}", seconds=seconds, steps=steps)
    if code != 0 or status.state != "completed":
        return RunOutcome("failed", error=status.error or _last_lines(log), seconds=seconds, steps=steps)
    try:
        value = metric_at(read_json(run.results), objective)
    except RmspecError as exc:
        return RunOutcome("failed", error=exc.message, seconds=seconds, steps=steps)
    return RunOutcome("completed", value=value, seconds=seconds, steps=steps)


def stop_trainer(run: RunDir, wait: float = 30.0) -> None:
    """Kill the run's training processes by the trainer's process id (status.json), its launcher with them:
    a pruned trial needs no checkpoint, so SIGKILL, not the SIGINT that saves one."""
    pid = read_status(run).pid
    if not pid:
        return
    try:
        group = os.getpgid(pid)
        if group != os.getpgid(0):  # the launcher's own session (rmspec.launch.local): all its ranks
            os.killpg(group, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    end = time.monotonic() + wait
    while process_alive(pid) and time.monotonic() < end:
        time.sleep(0.05)


def process_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class MetricsFollower:
    """New (step, value) rows of one key of RUN/metrics.jsonl as the trainer appends them."""

    def __init__(self, run: RunDir, metric: str | None):
        self.path = run.metrics
        self.metric = metric
        self.offset = 0
        self.seen: list[tuple[int, float]] = []

    def new_values(self) -> list[tuple[int, float]]:
        if self.metric is None or not self.path.exists():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next poll
        self.offset += end
        found = []
        for line in chunk[:end].decode("utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            value = row.get(self.metric)
            # the final evaluation repeats a step (model_step); only evaluations during training are reported
            if isinstance(value, (int, float)) and "model_step" not in row and isinstance(row.get("step"), int):
                found.append((row["step"], float(value)))
        self.seen += found
        return found


def _last_lines(log: Path, n: int = 15) -> str:
    from rmspec.launch.prepare import tail

    return tail(log, n)
