"""RUN/checkpoints/checkpoint-STEP: the one rule for "the last complete checkpoint".

The Trainer writes trainer_state.json last, so a checkpoint folder without it is a save that a
killed process left half done. Readers (`rmspec status`) only skip such folders; the trainer,
about to resume, also removes them (`remove_partial=True`) so that they cannot be picked later
or fill the disk. Light: no torch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

PREFIX = "checkpoint-"
STATE_FILE = "trainer_state.json"


def checkpoint_folders(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint-STEP folder, newest first, complete or not."""
    if not Path(folder).is_dir():
        return []
    found = []
    for path in Path(folder).iterdir():
        step = path.name.rsplit("-", 1)[-1]
        if path.is_dir() and path.name.startswith(PREFIX) and step.isdigit():
            found.append((int(step), path))
    return sorted(found, reverse=True)


def last_complete_checkpoint(folder: Path, *, remove_partial: bool) -> str | None:
    """The newest checkpoint whose trainer_state.json exists, or None. With `remove_partial`, the
    partial folders newer than it are deleted (only the trainer of a run may ask for that)."""
    for _, path in checkpoint_folders(folder):
        if (path / STATE_FILE).exists():
            return str(path)
        if remove_partial:
            shutil.rmtree(path, ignore_errors=True)
    return None


def checkpoint_is_final(checkpoint: str) -> bool:
    """The checkpoint's trainer state has reached its max_steps: training is over."""
    try:
        saved = json.loads((Path(checkpoint) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return 0 < int(saved.get("max_steps") or 0) <= int(saved.get("global_step") or 0)


def checkpoint_step(checkpoint: str | None) -> int:
    return int(Path(checkpoint).name.rsplit("-", 1)[-1]) if checkpoint else 0
