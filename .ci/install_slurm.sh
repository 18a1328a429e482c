#!/usr/bin/env bash
# A real SLURM cluster for tests/test_slurm_*.py: Debian's slurmctld, slurmd, slurm-client and munge.
# There is no systemd here ("policy-rc.d denied execution" is expected): tests/slurm_cluster.py starts
# and stops the daemons itself. Idempotent and quiet; never fails CI (the tests then fail under CI=true,
# saying the binaries are missing).
# Not pinned: apt gives the distribution's SLURM (Debian 12 bookworm: 22.05.8-4+deb12u3, what the
# tests and the docs were checked with); the version it got is printed, so a CI log shows any other.
set -u
if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
   && command -v sbatch >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci: no apt-get; the SLURM tests will not find their daemons"
  exit 0
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  slurmctld slurmd slurm-client munge >/dev/null 2>&1 \
  || echo "ci: could not install the SLURM packages; the SLURM tests will not find their daemons"
command -v slurmd >/dev/null 2>&1 && echo "ci: $(slurmd -V) (tested with slurm 22.05.8)"
exit 0
