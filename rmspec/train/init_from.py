"""`model.init_from: RUN_DIR`: start from another run's trained model (the two-stage recipe:
HelpSteer2-Preference's regression model, then scaled Bradley-Terry from it).

The model is built from `model.name_or_path` as usual (architecture, tokenizer, a fresh head sized
for this approach); then every tensor of RUN_DIR/model whose name and shape agree replaces the
fresh one. The score head is taken when its shape agrees (a one-attribute regression head feeds a
Bradley-Terry head) and kept fresh otherwise (five attributes into one reward). What was taken is
returned as a sentence for the log and the run's status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.train.modeling import HEAD_NAMES


def init_model_from_run(model: Any, run_dir: str | Path) -> str:
    import torch
    from safetensors.torch import load_file

    folder = Path(run_dir)
    folder = folder / "model" if (folder / "model").is_dir() else folder
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise DataError(
            f"model.init_from: no trained model in {folder} (no *.safetensors)",
            "run the first stage to its end first, or point init_from at its run directory",
        )
    source: dict[str, Any] = {}
    for file in files:
        source.update(load_file(str(file)))
    target = model.state_dict()
    taken, skipped = [], []
    with torch.no_grad():
        for name, tensor in target.items():
            if name in source and source[name].shape == tensor.shape:
                tensor.copy_(source[name].to(tensor.dtype))
                taken.append(name)
            elif name in source:
                skipped.append(f"{name} {tuple(source[name].shape)} -> {tuple(tensor.shape)}")
    if not taken:
        raise DataError(
            f"model.init_from: no tensor of {folder} fits this model (another architecture?)",
            "init_from must name a run trained from the same model.name_or_path",
        )
    head = [n for n in taken if n.split(".")[0] in HEAD_NAMES]
    head_note = (
        "the score head too (same shape)"
        if head
        else "a fresh score head (" + "; ".join(s for s in skipped if s.split(".")[0] in HEAD_NAMES) + ")"
        if skipped
        else "a fresh score head (none in the source)"
    )
    return f"model.init_from {run_dir}: {len(taken)} of {len(target)} tensors taken from {folder}; {head_note}"
