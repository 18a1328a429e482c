#!/usr/bin/env bash
# The RL trainers' own client code, for tests/test_serve_rl_clients.py: OpenRLHF 0.11.2 and verl
# 0.9.1 without their heavy dependencies (deepspeed, vLLM, flash-attn: --no-deps), plus only what
# their client modules import (measured by importing them: pylatexenc for openrlhf.utils; ray,
# omegaconf, tensordict, codetiming for verl's reward loop and router). OpenRLHF 0.9.0's batch
# client goes beside 0.11.2 in its own folder (--target): one site-packages holds one version.
# Runs before `make test` in .ci/run, so it builds the venv first (`make install` is idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
make install
PIP=".venv/bin/pip install -q --disable-pip-version-check"
$PIP --no-deps openrlhf==0.11.2 verl==0.9.1
$PIP -c constraints.txt pylatexenc ray omegaconf "tensordict>=0.8,<=0.10" codetiming
$PIP --no-deps --target .venv/openrlhf-0.9.0 openrlhf==0.9.0
.venv/bin/python -c "import openrlhf.utils.agent, verl.experimental.reward_loop.reward_loop, verl.experimental.reward_loop.router.naive_router"
echo "ci: RL clients installed (openrlhf 0.11.2, verl 0.9.1, openrlhf 0.9.0 beside them)"
