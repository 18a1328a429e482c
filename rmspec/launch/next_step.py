"""What to run next on a run that stopped: resume it, or fix the input and start it afresh.

`--resume` continues with the spec and data the run saved (RUN/spec.yaml, its plan). That helps a
run that stopped on its way (Ctrl-C, a killed process, a crash in training); it repeats the failure
of a run whose spec or data is wrong (status.json `exit_code` 2: a located input error found by the
training process), so that one is told to fix the spec and start again with --overwrite. One home
for the advice that `rmspec run` (the outcome, and a second run into the same folder) and
`rmspec status` give. Light: no torch.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

INPUT_ERROR = 2  # the exit code of a run stopped by its spec or data (rmspec.errors: a user error)


def input_failed(status: Any) -> bool:
    """The run failed on its spec or data: resuming it would fail the same way."""
    state = status.get("state") if isinstance(status, dict) else getattr(status, "state", None)
    code = status.get("exit_code") if isinstance(status, dict) else getattr(status, "exit_code", None)
    return state == "failed" and code == INPUT_ERROR


def rerun_command(root: Path) -> str:
    """`rmspec run SPEC [--set ...] --overwrite` with the spec and overrides the run was planned from."""
    spec, sets = "SPEC", []
    try:
        plan = json.loads((Path(root) / "plan.json").read_text(encoding="utf-8"))
        spec, sets = plan.get("spec_path") or spec, list(plan.get("sets") or [])
    except (OSError, ValueError):
        pass
    words = ["rmspec", "run", str(spec)]
    for item in sets:
        words += ["--set", str(item)]
    return shlex.join(words) + " --overwrite"


def next_step(root: Path, status: Any, *, submit: bool = False) -> str:
    """The advice for a stopped or failed run in ROOT, as one sentence naming the command."""
    if input_failed(status):
        return (
            f"fix the spec or the data, then `{rerun_command(root)}` starts afresh "
            "(--resume would reuse the saved spec and data and fail the same way)"
        )
    return f"`rmspec run --resume {root}{' --submit' if submit else ''}` continues from the last checkpoint"
