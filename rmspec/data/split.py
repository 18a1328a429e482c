"""Train/validation split: seeded, grouped by prompt (a prompt never lands on both sides), and
optionally stratified (each stratum gives the same share of its prompts to validation)."""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any

from rmspec.data.columns import column
from rmspec.errors import DataError


def validation_mask(
    prompt_keys: list[str], fraction: float, seed: int, *, strata: list[str] | None = None, group_by_prompt: bool = True
) -> list[bool]:
    """One flag per row: True = validation. Units are prompts (or rows); a unit's stratum is its first row's."""
    units: OrderedDict[str, str] = OrderedDict()
    unit_of = []
    for i, key in enumerate(prompt_keys):
        unit = key if group_by_prompt else str(i)
        unit_of.append(unit)
        if unit not in units:
            units[unit] = strata[i] if strata is not None else ""
    by_stratum: OrderedDict[str, list[str]] = OrderedDict()
    for unit, stratum in units.items():
        by_stratum.setdefault(stratum, []).append(unit)
    rng = random.Random(seed)
    held: set[str] = set()
    for stratum in sorted(by_stratum):
        members = by_stratum[stratum]
        rng.shuffle(members)
        held.update(members[: round(len(members) * fraction)])
    if not held and len(units) > 1 and fraction > 0:  # tiny data: still validate on something
        held.add(rng.choice(list(units)))
    return [u in held for u in unit_of]


def split_rows(kept: Any, split: Any) -> tuple[Any, Any]:
    """(train, validation or None) of one dataset's kept rows: seeded, grouped by prompt."""
    if not split.validation_fraction:
        return kept, None
    strata = None
    if split.stratify_by:
        if split.stratify_by not in kept.column_names:
            raise DataError(
                f"data.split.stratify_by: no canonical column {split.stratify_by!r}",
                "stratify by group (map the column with data.mapping.columns.group)",
            )
        strata = [str(v) for v in column(kept, split.stratify_by)]
    mask = validation_mask(
        column(kept, "prompt_key"),
        split.validation_fraction,
        split.seed,
        strata=strata,
        group_by_prompt=split.group_by_prompt,
    )
    return kept.select([i for i, v in enumerate(mask) if not v]), kept.select([i for i, v in enumerate(mask) if v])
