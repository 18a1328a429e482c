"""Which devices each of the trials running at once on this host gets (sweep.parallel).

GPUs: a trial takes as many GPUs as its plan starts processes on its node (plan.processes_per_node) and
runs with CUDA_VISIBLE_DEVICES naming only those, so no two trials share a device; a trial waits until
enough are free. The host's GPUs are CUDA_VISIBLE_DEVICES when set, else what `nvidia-smi -L` lists.
CPU: the cores this process may use (its affinity) are split into `parallel` equal slices; a trial runs
pinned to its slice (sched_setaffinity, inherited by the launcher and its workers) with OMP_NUM_THREADS set
to the slice's cores per process, so two trials do not fight over one core's caches and threads.
Light: no torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field


def host_gpus() -> list[str]:
    """The GPUs this host shows (ids as CUDA_VISIBLE_DEVICES takes them); [] on a CPU host."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(listed.stdout.splitlines()) if line.startswith("GPU ")]


def host_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def core_slices(cores: list[int], parallel: int) -> list[list[int]]:
    """`parallel` disjoint slices of `cores` (as equal as they come); shared round-robin when too few cores."""
    if parallel <= len(cores):
        size = len(cores) // parallel
        return [cores[i * size : (i + 1) * size] for i in range(parallel)]
    return [[cores[i % len(cores)]] for i in range(parallel)]


def trials_at_once(parallel: int, gpus: int, per_trial: int) -> int:
    """How many trials run together: `parallel`, bounded by how many trials' GPUs the host holds."""
    if gpus == 0:
        return parallel
    return max(0, min(parallel, gpus // max(per_trial, 1)))


@dataclass
class Grant:
    """What one trial got: its GPUs (CUDA_VISIBLE_DEVICES) or its cores."""

    gpus: list[str] = field(default_factory=list)
    cores: list[int] = field(default_factory=list)

    def environment(self, processes: int) -> dict[str, str]:
        if self.gpus:
            return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus)}
        if self.cores:
            return {"OMP_NUM_THREADS": str(max(1, len(self.cores) // max(processes, 1)))}
        return {}

    def describe(self) -> str:
        if self.gpus:
            return f"GPU {','.join(self.gpus)}"
        return f"cores {','.join(map(str, self.cores))}" if self.cores else ""


class DevicePool:
    """The host's GPUs (or core slices), handed to trials and given back; blocks while too few are free."""

    def __init__(self, parallel: int, gpus: list[str] | None = None, cores: list[int] | None = None):
        self.gpus = list(host_gpus() if gpus is None else gpus)
        self.free_gpus = list(self.gpus)
        self.free_slices = core_slices(host_cores() if cores is None else cores, parallel)
        self.changed = threading.Condition()

    def take(self, gpus_needed: int) -> Grant:
        """A grant for a trial whose plan needs `gpus_needed` GPUs (0: a CPU plan). ValueError when the host
        has fewer GPUs than that, so the trial fails saying so instead of waiting for ever."""
        with self.changed:
            if gpus_needed and self.gpus:
                if gpus_needed > len(self.gpus):
                    raise ValueError(f"the trial's plan needs {gpus_needed} GPUs; this host has {len(self.gpus)}")
                self.changed.wait_for(lambda: len(self.free_gpus) >= gpus_needed)
                taken, self.free_gpus = self.free_gpus[:gpus_needed], self.free_gpus[gpus_needed:]
                return Grant(gpus=taken)
            self.changed.wait_for(lambda: bool(self.free_slices))
            return Grant(cores=self.free_slices.pop(0))

    def give_back(self, grant: Grant) -> None:
        with self.changed:
            self.free_gpus += grant.gpus
            self.free_gpus.sort(key=self.gpus.index)
            if grant.cores:
                self.free_slices.append(grant.cores)
            self.changed.notify_all()
