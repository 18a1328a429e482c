"""A real two-node SLURM cluster on 127.0.0.1 for the tests (REFERENCE.md section 8).

munged, slurmctld and two slurmd daemons (nodes n1 and n2 on one host, each with its own port
and spool folder), every path in a temporary folder, every daemon stopped by PID at the end.
Debian's slurmctld, slurmd, slurm-client and munge packages (.ci/install_slurm.sh) provide them;
without them the tests skip and say so, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import ci

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
SBIN = ("/usr/sbin", "/sbin")
CTLD_PORT = 6817
NODE_PORTS = {"n1": 17001, "n2": 17002}


def _which(name: str) -> str | None:
    return shutil.which(name) or next((f"{d}/{name}" for d in SBIN if Path(f"{d}/{name}").exists()), None)


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if _which(name) is None]


def _port_busy(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def slurm_conf(root: Path, host: str) -> str:
    nodes = "\n".join(
        f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs=1 RealMemory=1000"
        for name, port in NODE_PORTS.items()
    )
    return f"""ClusterName=rmspectest
SlurmctldHost={host}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued batch job waits cred_expire seconds before it may start again (default 120): 5 here.
AuthInfo=cred_expire=5
SlurmctldPort={CTLD_PORT}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=30
# SIGTERM to SIGKILL: SLURM's default. The trainer saves a checkpoint on SIGTERM; at 5 s a loaded machine
# killed it mid-save (test_scancel_leaves_interrupted_with_the_last_checkpoint, status left 'running').
KillWait=30
# Scheduling passes every 2 s (default 60 s, backfill 30 s): a requeued job, eligible again once its
# cred_expire is over, waits for the next pass (measured: restarted 27 s after the requeue, 7 s with these).
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2,bf_interval=2
{nodes}
PartitionName=debug Nodes={",".join(NODE_PORTS)} Default=YES MaxTime=INFINITE State=UP
# A second partition, not the default, with a time limit: a spec's hardware.slurm.partition and .time must
# reach sbatch for a job to land here (tests/test_slurm_train.py reads the job's Partition and TimeLimit).
PartitionName=rmspec Nodes={",".join(NODE_PORTS)} Default=NO MaxTime=30 State=UP
"""


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    munged_pid: int | None = None

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (sbatch, squeue, rmspec) needs to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=check)

    def job_state(self, job_id: str) -> str:
        """squeue's state while the job is known to the controller ('' once it is gone)."""
        return self.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).stdout.strip()

    def wait_job(
        self,
        job_id: str,
        timeout: float,
        until=lambda state: (
            state
            in (
                "",
                "COMPLETED",
                "FAILED",
                "CANCELLED",
                "TIMEOUT",
                "NODE_FAIL",
                "OUT_OF_MEMORY",
                "BOOT_FAIL",
                "DEADLINE",
            )
        ),
    ) -> str:
        """Poll squeue (faster than sbatch --wait, REFERENCE 8) until `until(state)`; returns the state."""
        end = time.time() + timeout
        while time.time() < end:
            state = self.job_state(job_id)
            if until(state):
                return state
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} still {self.job_state(job_id)!r} after {timeout} s\n" + self.logs())

    def wait_idle(self, timeout: float = 60) -> None:
        end = time.time() + timeout
        while time.time() < end:
            out = self.run("sinfo", "-h", "-o", "%T %D", check=False).stdout.split()
            if out[:2] == ["idle", "2"]:
                return
            time.sleep(0.5)
        raise RuntimeError("the two SLURM nodes did not become idle:\n" + self.logs())

    def logs(self) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*.log")):
            out.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(out)

    def stop(self) -> None:
        for proc in reversed(self.procs):  # slurmd first, then slurmctld
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if self.munged_pid:
            _kill_pid(self.munged_pid)


def _kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def _start_munge(root: Path) -> int | None:
    """munged (unless one already serves the default socket); returns the PID this fixture started."""
    pidfile = Path("/run/munge/munged.pid")
    if pidfile.exists():
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, 0)
            return None  # someone else's munged is running: use it, leave it alone
        except (ValueError, ProcessLookupError, PermissionError):
            pass
    subprocess.run(["install", "-d", "-o", "munge", "-g", "munge", "-m", "755", "/run/munge"], check=True)
    subprocess.run(
        ["runuser", "-u", "munge", "--", _which("munged")], check=True, capture_output=True, text=True, timeout=30
    )
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            return int(pidfile.read_text().strip())
        time.sleep(0.05)
    raise RuntimeError("munged did not write /run/munge/munged.pid")


def start_cluster(root: Path) -> SlurmCluster:
    host = socket.gethostname().split(".")[0]
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)  # slurmd creates only the last folder of its spool
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf(root, host))
    cluster = SlurmCluster(root, conf)
    try:
        cluster.munged_pid = _start_munge(root)
        daemon_log = (root / "log" / "daemons.out").open("w")
        cluster.procs.append(
            subprocess.Popen(
                [_which("slurmctld"), "-D", "-f", str(conf)],
                env=cluster.env,
                stdout=daemon_log,
                stderr=subprocess.STDOUT,
            )
        )
        for name in NODE_PORTS:
            cluster.procs.append(
                subprocess.Popen(
                    [_which("slurmd"), "-D", "-f", str(conf), "-N", name],
                    env=cluster.env,
                    stdout=daemon_log,
                    stderr=subprocess.STDOUT,
                )
            )
        cluster.wait_idle()
    except BaseException:
        cluster.stop()
        raise
    return cluster


BUSY_WAIT_S = 900


def _busy_ports() -> list[int]:
    return [port for port in (CTLD_PORT, *NODE_PORTS.values()) if _port_busy(port)]


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """The two-node cluster, started once per test module; skips (fails under CI=true) without SLURM.
    Per module, not per session: `make test` runs modules on two workers, and the daemons' ports are fixed,
    so a module whose ports another worker's cluster holds waits for that module to end (BUSY_WAIT_S)."""
    missing = missing_binaries()
    deadline = time.monotonic() + BUSY_WAIT_S
    busy = _busy_ports()
    while busy and not missing and time.monotonic() < deadline:
        time.sleep(2)
        busy = _busy_ports()
    reason = None
    if missing:
        reason = f"SLURM is not installed (missing {', '.join(missing)}); run .ci/install_slurm.sh"
    elif os.geteuid() != 0:
        reason = "the SLURM test cluster runs its daemons as root (SlurmUser=root)"
    elif busy:
        reason = f"ports {busy} are taken: another SLURM controller or node is running here"
    if reason:
        ci.missing(reason)
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()
