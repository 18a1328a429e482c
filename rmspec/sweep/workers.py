"""The trials this sweep process runs at once (threads, their `rmspec run` children or SLURM jobs, the
device pool), and the name this process goes by as a worker of a study."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import Any

from rmspec.rundir.lock import owner_record
from rmspec.sweep.devices import DevicePool
from rmspec.sweep.state import Sweep

# How often the loop looks again, and a wait for a run's owner polls.
IDLE_SECONDS = 0.5


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


def worker_name() -> str:
    return f"{owner_record('rmspec sweep')['host']}:{os.getpid()}"
