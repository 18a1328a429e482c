"""The data report's figures: token lengths, truncation, duplicates, ties and groups, computed
over the kept rows (and a separate validation source's) in Arrow and numpy."""

from __future__ import annotations

from typing import Any

from rmspec.data.columns import arrow, column, numbers
from rmspec.data.report import DataReport, SourceCounts, distribution, length_heuristic
from rmspec.spec.row_kinds import RowKind


def summarize(
    approach: str,
    layout: Any,
    max_length: int | None,
    notes: list[str],
    sources: dict[str, SourceCounts],
    splits: dict[str, Any],
    kept: Any,
    validation: Any,
    augmented: dict[str, int],
    augmented_rejected: dict[str, int],
    seconds: float,
) -> DataReport:
    """The report of one preparation: `max_length` is the limit the max_length filter applied (None
    when none ran), `notes` what the stages said, in order (repeats dropped)."""
    report = DataReport(
        approach=approach,
        layout=layout.kind if layout else None,
        max_length=max_length,
        sources=sources,
        splits={k: len(v) for k, v in splits.items() if v is not None},
        augmented=augmented,
        augmented_rejected=augmented_rejected,
        notes=list(dict.fromkeys(notes)),
        seconds=round(seconds, 2),
    )
    pool = kept
    if validation is not None and "validation" in sources:  # a separate validation source: both sides
        import datasets

        pool = datasets.concatenate_datasets([kept, validation])
    n = len(pool)
    cols = pool.column_names
    if approach == RowKind.PAIRS and "chosen_tokens" in cols:
        chosen, rejected = numbers(pool, "chosen_tokens"), numbers(pool, "rejected_tokens")
        report.length_heuristic_accuracy = length_heuristic(chosen, rejected)
        prompts = numbers(pool, "prompt_tokens")
        # Responses alone, and whole sequences (special tokens included, before any cut) against the limit.
        report.token_lengths = {
            "prompt": distribution(prompts, None),
            "chosen": distribution(chosen, None),
            "rejected": distribution(rejected, None),
            "chosen_sequence": distribution(numbers(pool, "chosen_length"), report.max_length),
            "rejected_sequence": distribution(numbers(pool, "rejected_length"), report.max_length),
        }
    elif approach == RowKind.SCORED and "response_tokens" in cols:
        report.token_lengths = {
            "prompt": distribution(numbers(pool, "prompt_tokens"), None),
            "response": distribution(numbers(pool, "response_tokens"), None),
            "sequence": distribution(numbers(pool, "length"), report.max_length),
        }
    elif approach == RowKind.MESSAGES and "total_tokens" in cols:
        report.token_lengths = {"sequence": distribution(numbers(pool, "total_tokens"), report.max_length)}
    elif approach == RowKind.STEPS and "total_tokens" in cols:
        from rmspec.data.steps import step_report

        report.token_lengths = {
            "prompt": distribution(numbers(pool, "prompt_tokens"), None),
            "sequence": distribution(numbers(pool, "total_tokens"), report.max_length),
        }
        report.steps = step_report(pool)
    if "truncated" in cols and n:
        report.truncation_rate = round(float(numbers(pool, "truncated").sum()) / n, 4)
    if "shared_prefix_cut" in cols and n:
        report.shared_prefix_cut_pairs = int(numbers(pool, "shared_prefix_cut").sum())
    if n:
        import numpy as np

        report.duplicate_rate = round(1 - np.unique(_row_hashes(pool, approach)).size / n, 4)
    if approach == RowKind.PAIRS and n:
        import pyarrow.compute as pc

        report.ties = int(pc.sum(pc.equal(arrow(pool, "score_chosen"), arrow(pool, "score_rejected"))).as_py() or 0)
    report.groups = _groups(pool, validation if "validation" not in sources else None, approach)
    return report


def _row_hashes(ds: Any, approach: str) -> Any:
    """One 64-bit hash per row (8 bytes a row, not a Python string): rmspec.data.identity's row key,
    so rows that share a question but not a picture are not duplicates."""
    import numpy as np

    from rmspec.data.identity import row_key, row_key_columns

    out = np.empty(len(ds), dtype=np.uint64)
    k = 0
    for batch in ds.select_columns(row_key_columns(approach, ds.column_names)).iter(batch_size=2000):
        for j in range(len(batch["id"])):
            out[k] = int(row_key(batch, j, "row", approach)[:16], 16)
            k += 1
    return out


def _groups(pool: Any, validation: Any, approach: str) -> dict[str, dict[str, Any]]:
    if "group" not in pool.column_names:
        return {}
    import numpy as np

    encoded = arrow(pool, "group").combine_chunks().dictionary_encode()
    names = [g or "(none)" for g in encoded.dictionary.to_pylist()]
    if names == ["(none)"] or not names:
        return {}
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    have_len = approach == RowKind.PAIRS and "chosen_tokens" in pool.column_names
    chosen = numbers(pool, "chosen_tokens") if have_len else None
    rejected = numbers(pool, "rejected_tokens") if have_len else None
    val_counts: dict[str, int] = {}
    if validation is not None and "group" in validation.column_names:
        for g, n in zip(*np.unique(np.asarray(column(validation, "group"), dtype=object), return_counts=True)):
            val_counts[g or "(none)"] = int(n)
    out: dict[str, dict[str, Any]] = {}
    for code, g in sorted(enumerate(names), key=lambda cg: cg[1]):
        mask = codes == code
        entry: dict[str, Any] = {"rows": int(mask.sum()), "validation": val_counts.get(g, 0)}
        if chosen is not None and rejected is not None:  # have_len
            entry["length_heuristic_accuracy"] = length_heuristic(chosen[mask], rejected[mask])
        out[g] = entry
    return out
