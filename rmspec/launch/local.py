"""The local launcher: the plan's launch command (`accelerate launch ... -m rmspec.launch.entrypoint
RUN/plan.json`, or `python -m rmspec.launch.entrypoint RUN/plan.json` for one process) on this machine,
followed in the live view, with Ctrl-C forwarded to the training processes. Light (no torch)."""

from __future__ import annotations

import os
import signal
import subprocess

from rmspec.plan import Plan
from rmspec.plan.argv import resolve_program, runtime_env
from rmspec.rundir import RunDir


def launch_command(run_dir: RunDir, plan: Plan, resume: bool) -> list[str]:
    """The plan's argv, pointed at this run directory's files, --resume appended when resuming."""
    argv = list(plan.launch_command)
    if "--config_file" in argv:
        argv[argv.index("--config_file") + 1] = str(run_dir.accelerate_config)
    module = argv.index("-m")
    argv = argv[: module + 2] + [str(run_dir.plan)]
    if resume:
        argv.append("--resume")
    return resolve_program(argv)


def launch_environment(plan: Plan) -> dict[str, str]:
    env = {**runtime_env(plan.uses_cpu), **os.environ, **plan.launch_env}
    env["PYTHONUNBUFFERED"] = "1"  # the log and the live view follow the child as it goes
    return env


def title_of(plan: Plan) -> str:
    return f"{plan.name} ({plan.approach}, {plan.strategy})"


def launch(run_dir: RunDir, plan: Plan, resume: bool) -> int:
    """Run the plan here; returns the launcher's exit code once the training processes are done."""
    from rmspec.render.live_view import LiveView

    argv = launch_command(run_dir, plan, resume)
    log_path = run_dir.root / "train.log"
    with log_path.open("a", encoding="utf-8") as log, LiveView(run_dir.metrics, title_of(plan)) as view:
        view.note(f"run directory: {run_dir.root}   log: {log_path}")
        view.note("$ " + " ".join(argv))
        # A session of its own: the terminal's Ctrl-C reaches this process only, which then asks
        # the training processes (not a launcher between us) to save and stop.
        child = subprocess.Popen(
            argv, env=launch_environment(plan), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        interrupts = 0
        while True:
            try:
                return child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                view.poll()
            except KeyboardInterrupt:
                interrupts += 1
                if interrupts == 1:
                    view.note("interrupt: saving a checkpoint, then stopping (Ctrl-C again to stop at once)")
                    signal_workers(child.pid, signal.SIGINT)
                else:
                    signal_workers(child.pid, signal.SIGINT)
                    os.killpg(child.pid, signal.SIGTERM)


def signal_workers(child_pid: int, sig: int) -> None:
    """Send ``sig`` to the training processes: the child itself when it is the trainer (one process),
    else those under the launcher (the launcher itself would die on it)."""
    import psutil

    try:
        child = psutil.Process(child_pid)
        workers = [child, *child.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in workers:
        try:
            if is_trainer(proc.cmdline()):
                proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def is_trainer(cmdline: list[str]) -> bool:
    """A training process runs the entrypoint module; `accelerate launch` names it too, but is the launcher."""
    return "rmspec.launch.entrypoint" in cmdline and not any(os.path.basename(part) == "accelerate" for part in cmdline)
