#!/usr/bin/env bash
# A real Label Studio server for tests/test_annotate_roundtrip.py, in its OWN venv (.venv-label-studio/,
# about 1 GB with Django): its pins must not mix with the project's (REFERENCE.md section 6).
# Pinned to the version the tests and the docs were checked against (LABEL_STUDIO_VERSION);
# a venv holding another version gets this one. Idempotent and quiet; never fails CI (the tests then
# fail under CI=true, saying it is missing).
set -u
cd "$(dirname "$0")/.."
VENV=.venv-label-studio
LABEL_STUDIO_VERSION=1.23.2
if [[ -x "$VENV/bin/label-studio" ]] \
   && "$VENV/bin/pip" show label-studio 2>/dev/null | grep -qx "Version: $LABEL_STUDIO_VERSION"; then
  exit 0
fi
PYTHON=${PYTHON:-python3}
"$PYTHON" -m venv "$VENV" || { echo "ci: could not create $VENV; the Label Studio tests will not find it"; exit 0; }
"$VENV/bin/pip" install -q --disable-pip-version-check "label-studio==$LABEL_STUDIO_VERSION" \
  || echo "ci: could not install label-studio; the Label Studio tests will not find it"
exit 0
