"""Process (per-step) tasks: the numbered reasoning steps and the first wrong step (ProcessBench's
labelling: steps before it are correct, it is wrong, later ones are not judged).

Recognised on import but not read yet: `annotate import` refuses an export holding them, and their
`first_error` results are neither read nor turned into rows; agreement leaves them out.
"""

from __future__ import annotations

from typing import Any

from rmspec.annotate.kinds.base import Scale, TaskKind
from rmspec.annotate.label_config import FIRST_ERROR_NAME, process_config
from rmspec.annotate.records import STEP_LABELS_FIELD
from rmspec.spec.approach import STEPS


class Process(TaskKind):
    name = "process"
    row_kind = STEPS

    def item(self, row: dict[str, Any]) -> dict[str, Any]:
        labels = row.get("step_labels")
        return {"steps": list(row["steps"]), "step_labels": list(labels) if labels else None}

    def task_data(
        self, item: dict[str, Any], swapped: bool, attributes: list[str], scale: Scale | None
    ) -> dict[str, Any]:
        # one paragraph per step, numbered as the annotator counts them
        data: dict[str, Any] = {"steps": [{"step": f"step {i + 1}", "text": s} for i, s in enumerate(item["steps"])]}
        if item.get("step_labels") is not None:
            data[STEP_LABELS_FIELD] = [int(v) for v in item["step_labels"]]  # the source's, for audits
        return data

    def label_config(self, attributes: list[str], scale: Scale | None) -> str:
        return process_config()

    def controls(self, row: dict[str, Any]) -> list[str]:
        return [FIRST_ERROR_NAME]


KIND = Process()
