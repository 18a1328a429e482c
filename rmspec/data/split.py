"""Train/validation split: seeded, grouped by prompt (a prompt never lands on both sides), and
optionally stratified (each stratum gives the same share of its prompts to validation).

A prompt is its text and its pictures: the unit is the record's ``prompt_key``
(rmspec.data.identity), so rows that ask one question about different pictures are different
prompts. A split asked for validation rows that holds none stops the data stage (before training)
with the cause: :func:`require_validation`."""

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
    if len(held) == len(units) > 1:  # a large fraction of a few prompts: still train on something
        held.discard(rng.choice(sorted(held)))
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


def validation_on(spec: Any) -> bool:
    """Whether the run reads its validation split: the end-of-run evaluation (eval.validation) or the
    evaluations during training (training.eval_steps, which early stopping and final_model: best need)."""
    return bool(spec.eval.validation or spec.training.eval_steps is not None)


def require_validation(
    validation: Any, split: Any, kept: list[Any], rejected: dict[str, int] | None = None, on: bool = True
) -> None:
    """Raise a DataError (exit 2, before training) when validation is `on` (:func:`validation_on`), the
    split asks for validation rows and holds none: `kept` are the rows each dataset split (a prompt_key
    column each), `rejected` the validation source's rejects by reason."""
    if not on or (validation is not None and len(validation)):
        return
    if split.validation_source is not None:
        why = f" (rejected: {', '.join(f'{r} {n:,}' for r, n in rejected.items())})" if rejected else ""
        raise DataError(
            f"data.split.validation_source: no validation rows left after mapping and filters{why}",
            "check the validation source's rows and mapping (the rejects file says why each row left), "
            "or hold out a fraction instead: data.split.validation_fraction",
        )
    if not split.validation_fraction:
        return
    rows = sum(len(k) for k in kept)
    off = "or train without validation: data.split.validation_fraction: null"
    if split.group_by_prompt:
        prompts = [len(set(column(k, "prompt_key"))) for k in kept]
        if rows > 1 and max(prompts, default=0) <= 1:
            who = f"all {rows:,} rows share one prompt" if len(kept) == 1 else "each dataset's rows share one prompt"
            raise DataError(
                f"data.split: the validation split is empty: {who} (its text and its pictures), and the "
                "split keeps a prompt's rows on one side",
                f"give the data more prompts, or set data.split.group_by_prompt: false (a prompt's rows may then "
                f"land on both sides), {off}",
            )
    raise DataError(
        f"data.split: the validation split is empty: {rows:,} row{'s' if rows != 1 else ''} to split, none held out "
        f"at validation_fraction {split.validation_fraction:g}",
        f"give the data more rows, or a separate data.split.validation_source, {off}",
    )
