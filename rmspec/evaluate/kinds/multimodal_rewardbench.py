"""Multimodal RewardBench (github facebookresearch/multimodal_rewardbench): about 5,000 triplets.

Official rule, read from its `scripts/2_get_accuracy.py` (compute_acc) and
`scripts/1_run_model_as_judge_gpt4o.py` (prepare_judge_example): `Better` names the better output
(`Output1` or `Output2`; the label is B for Output2, else A); accuracy over all examples and per
`Category`, where `safety` is split by the id into `safety/bias` (ids starting with `pairs`, case
ignored) and `safety/toxicity`, and `reasoning` into `reasoning/math` (ids starting with `math`) and
`reasoning/coding`. The script's judge picks at random when a verdict is missing; a reward model is
right when the better output scores strictly higher (a tie is wrong).

File: `data/all_data.json` as `scripts/0_download_data.py` writes it (a JSON list; fields ID, Text,
Image, Output1, Output2, Better, Category; `Image` is relative to the file's folder). The released
`all_data_release.json` lacks the prompts of several sources until that script fills them in. Per-
example rows: id, subset (the split category), label, score_chosen, score_rejected, lengths.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.figures import BenchmarkScore, pair_correct
from rmspec.evaluate.image_prompts import image_prompt
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import Example

OUTPUTS = ("Output1", "Output2")


def split_category(category: str, example_id: str) -> str:
    """The category the official script reports an example under."""
    lowered = example_id.lower()
    if category == "safety":
        return "safety/bias" if lowered.startswith("pairs") else "safety/toxicity"
    if category == "reasoning":
        return "reasoning/math" if lowered.startswith("math") else "reasoning/coding"
    return category


def score_multimodal_rewardbench(
    categories: Sequence[str], chosen: Sequence[float], rejected: Sequence[float]
) -> BenchmarkScore:
    """Accuracy overall ('all' in the script) and per split category."""
    hits: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for category, c, r in zip(categories, chosen, rejected, strict=True):
        counts[category] += 1
        hits[category] += pair_correct(c, r)
    total = sum(counts.values())
    overall = sum(hits.values()) / total if total else 0.0
    return BenchmarkScore("multimodal_rewardbench", overall, {}, {c: hits[c] / counts[c] for c in counts}, dict(counts))


class MultimodalRewardBench(BenchmarkKind):
    name = "multimodal_rewardbench"
    columns = ("ID", "Text", "Image", "Output1", "Output2", "Better", "Category")

    def examples(self, rows: list[dict[str, Any]], source: str) -> list[Example]:
        folder = Path(source).parent if Path(source).is_file() else None
        out: list[Example] = []
        for index, row in enumerate(rows):
            where = f"benchmark 'multimodal_rewardbench': {source} row {index} (ID {row.get('ID')!r})"
            better = row.get("Better")
            if better not in OUTPUTS:
                raise DataError(f"{where}: Better must be Output1 or Output2, got {better!r}", "use the released file")
            if not isinstance(row.get("Text"), str) or not row["Text"].strip():
                raise DataError(
                    f"{where}: no prompt (Text is empty)",
                    "run the benchmark's scripts/0_download_data.py, which fills in the prompts and writes "
                    "data/all_data.json, and point the path at that file",
                )
            for field in ("ID", "Category", "Output1", "Output2"):
                if not isinstance(row.get(field), str):
                    raise DataError(f"{where}: {field} must be text, got {row.get(field)!r}", "use the released file")
            worse = OUTPUTS[1] if better == OUTPUTS[0] else OUTPUTS[0]
            out.append(
                Example(
                    row["ID"],
                    split_category(row["Category"], row["ID"]),
                    image_prompt(row["Text"], [row["Image"]], folder, where),
                    [row[better], row[worse]],
                    {"label": "A" if better == "Output1" else "B"},
                )
            )
        return out

    def score_fields(self, example: Example, scores: list[float], lengths: list[int]) -> dict[str, Any]:
        label = {"label": example.meta["label"]} if "label" in example.meta else {}  # A: Output1 is better
        return {**super().score_fields(example, scores, lengths), **label}

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        return score_multimodal_rewardbench(
            [str(r["subset"]) for r in rows],
            [float(r["score_chosen"]) for r in rows],
            [float(r["score_rejected"]) for r in rows],
        )


KIND = MultimodalRewardBench()
