"""Examples that `rmspec init --example` builds rather than copies: their files (a tiny model, pictures)
are made by the heavy side, so init runs the builder as a subprocess and stays light (no torch here).

`multimodal`: ``python -m rmspec.vision.demo FOLDER --spec OUT``: one-colour pictures, a grey copy,
a tiny Qwen2-VL built offline from a config, and the spec (its paths relative to the spec).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rmspec.errors import RmspecError

#: example name -> the module that builds it (run as `python -m MODULE FOLDER --spec OUT --name NAME`)
BUILT_EXAMPLES = {"multimodal": "rmspec.vision.demo"}


def files_folder(out: Path) -> Path:
    """Where a built example's files go: beside the spec, named after it (multimodal.yaml -> multimodal/)."""
    return out.with_suffix("") if out.suffix else out.with_name(f"{out.name}-files")


def build_example(example: str, out: Path, model: str | None, name: str | None) -> Path:
    """Run the example's builder; returns the folder it filled. Its error output is shown on failure."""
    if model is not None:
        raise RmspecError(
            f"--model: the {example} example builds its own tiny model",
            hint=f"rmspec init --example {example}, then set model.name_or_path in the spec to your model",
        )
    folder = files_folder(out)
    command = [sys.executable, "-m", BUILT_EXAMPLES[example], str(folder), "--spec", str(out)]
    if name is not None:
        command += ["--name", name]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RmspecError(
            f"building the {example} example failed: " + " | ".join(tail),
            hint="it needs the vision extra: pip install 'rmspec[vision]'",
        )
    return folder
