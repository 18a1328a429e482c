"""Any preference file (`pairs`), mapped by the data pipeline's presets: pair accuracy.

The figure is the share of pairs whose chosen response scores strictly higher, overall and per
subset (the first of subset/group/family/source/category the file has). Per-example rows: id,
subset, score_chosen, score_rejected, len_chosen, len_rejected. The validation split's rows
(entry kind `validation`) have the same layout and figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.figures import BenchmarkScore, accuracy_by_subset, mean, pair_correct
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import BenchmarkData, Example, load_rows, resolve_source
from rmspec.spec import presets
from rmspec.spec.row_kinds import RowKind

# Where a plain preference file may keep the group a row belongs to.
PAIR_SUBSET_COLUMNS = ("subset", "group", "family", "source", "category")


def score_pairs(subsets: Sequence[str], chosen: Sequence[float], rejected: Sequence[float]) -> BenchmarkScore:
    """Any preference file: accuracy (strict), overall and per subset/group."""
    accuracy, counts = accuracy_by_subset(subsets, chosen, rejected)
    overall = mean([float(pair_correct(c, r)) for c, r in zip(chosen, rejected)])
    return BenchmarkScore("pairs", overall, {}, accuracy, counts)


def pair_examples(rows: list[dict[str, Any]], source: str, preset: str | None) -> tuple[list[Example], list[str]]:
    """Any preference file, mapped by the data pipeline's presets (rmspec.data.presets.RowMapper).

    No preset: `pairs` when chosen is text, `conversational` when it is a message list. The
    subset is the first of subset/group/family/source/category the file has.
    """
    from rmspec.approaches.bradley_terry import BradleyTerry
    from rmspec.data.presets import RowMapper
    from rmspec.data.records import Reject
    from rmspec.inference.scorers.vision_prompts import with_image_parts
    from rmspec.spec.data import MappingSpec

    columns = list(rows[0])
    if preset is None:
        preset = presets.for_preference_file(rows[0])
    group = next((c for c in PAIR_SUBSET_COLUMNS if c in columns), None)
    mapping = MappingSpec.model_validate({"preset": preset, "columns": {"group": group} if group else {}})
    mapper = RowMapper(
        mapping,
        BradleyTerry(kind="bradley_terry"),
        columns,
        where=f"benchmark 'pairs' ({source}), preset {preset}",
        data_files=[source] if Path(source).is_file() else None,  # image paths are relative to the file
    )
    examples: list[Example] = []
    rejected: defaultdict[str, int] = defaultdict(int)
    for index, row in enumerate(rows):
        try:
            records = mapper(row, index)
        except Reject as exc:
            rejected[exc.reason] += 1
            continue
        for rec in records:
            prompt = rec["prompt_messages"] or ""
            if rec.get("images"):  # checked by the mapper (rmspec.vision.rows); back into the prompt as parts
                prompt = with_image_parts(prompt, rec["images"])
            examples.append(
                Example(str(rec["id"]), str(rec.get("group") or "all"), prompt, [rec["chosen"], rec["rejected"]])
            )
    notes = [f"{n} row(s) skipped: {reason}" for reason, n in sorted(rejected.items())]
    return examples, notes


class Pairs(BenchmarkKind):
    name = "pairs"  # columns: checked by the preset that maps the file (any layout it reads)

    def load(
        self,
        path: str | None,
        *,
        split: str | None = None,
        preset: str | None = None,
        limit: int | None = None,
        base_dir: Any = None,
    ) -> BenchmarkData:
        layout = presets.get(preset)
        if layout is not None and layout.rows != RowKind.PAIRS:
            raise DataError(
                f"benchmark 'pairs': preset {preset!r} does not give preference pairs",
                f"use a pairwise preset: {', '.join(presets.giving(RowKind.PAIRS))}",
            )
        source, local = resolve_source(self.name, path, base_dir)
        rows, used_split = load_rows(self.name, source, local, split)
        if limit is not None:
            rows = rows[:limit]
        if not rows:
            raise DataError(f"benchmark 'pairs': {source} has no rows", "check the file or the split")
        examples, notes = pair_examples(rows, source, preset)
        if not examples:
            raise DataError(
                f"benchmark 'pairs': no row of {source} maps to a pair ({'; '.join(notes)})",
                "check the preset and the columns",
            )
        return BenchmarkData(self.name, source, used_split, examples, notes)

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        return score_pairs(
            [str(r.get("subset") or "all") for r in rows],
            [float(r["score_chosen"]) for r in rows],
            [float(r["score_rejected"]) for r in rows],
        )


KIND = Pairs()
