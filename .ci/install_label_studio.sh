#!/usr/bin/env bash
# A real Label Studio server for tests/test_annotate_roundtrip.py, in its OWN venv (.venv-label-studio/,
# about 1 GB with Django): its pins must not mix with the project's (REFERENCE.md section 6).
# Idempotent and quiet; never fails CI (the tests then fail under CI=true, saying it is missing).
set -u
cd "$(dirname "$0")/.."
VENV=.venv-label-studio
if [[ -x "$VENV/bin/label-studio" ]] && "$VENV/bin/pip" show -q label-studio >/dev/null 2>&1; then
  exit 0
fi
PYTHON=${PYTHON:-python3}
"$PYTHON" -m venv "$VENV" || { echo "ci: could not create $VENV; the Label Studio tests will not find it"; exit 0; }
"$VENV/bin/pip" install -q --disable-pip-version-check label-studio \
  || echo "ci: could not install label-studio; the Label Studio tests will not find it"
exit 0
