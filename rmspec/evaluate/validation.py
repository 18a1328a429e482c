"""The validation split in the end-of-run evaluation: rebuilt as training built it, scored per pair."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.evaluate.excerpts import prompt_excerpt
from rmspec.inference import scorers

SIDES = ("chosen", "rejected")


def prepare_validation(loaded_spec: Any, tokenizer: Any, notes: list[str], cache_dir: Path | None = None) -> Any:
    """The tokenized validation split, or None with the reason added to notes."""
    from rmspec.data import prepare

    try:
        # The run's own cache (RUN/cache) holds the split training used: same rows, no recomputation.
        return prepare(
            loaded_spec, tokenizer, cache_dir=cache_dir if cache_dir and cache_dir.is_dir() else None
        ).validation
    except RmspecError as exc:
        notes.append(f"validation split not scored: {exc.message}")
        return None


def validation_rows(validation: Iterable[dict[str, Any]], engine: Any) -> list[dict[str, Any]]:
    """Per-example rows of the tokenized validation split (columns of rmspec.data.prepare)."""
    from rmspec.inference.encoding import Encoded

    rows = list(validation)
    # Encoders were trained with segment ids (prompt 0, response 1); score with them too.
    encoded: list[Any] = [Encoded(r["chosen_input_ids"], r.get("chosen_token_type_ids")) for r in rows] + [
        Encoded(r["rejected_input_ids"], r.get("rejected_token_type_ids")) for r in rows
    ]
    if (
        getattr(engine, "kind", None) is not None and scorers.of(engine).reads_images
    ):  # a VLM: each side read with the row's images
        from rmspec.inference.scorers.vision_reward import VisionInput

        encoded = [VisionInput("", list(r.get("images") or []), r[f"{side}_input_ids"]) for side in SIDES for r in rows]
    scores = [values[0] for values in engine.outputs(encoded)]
    n = len(rows)
    return [
        {
            "id": str(r.get("id", i)),
            "subset": str(r.get("group") or "all"),
            "score_chosen": scores[i],
            "score_rejected": scores[n + i],
            "len_chosen": len(r.get("chosen") or ""),
            "len_rejected": len(r.get("rejected") or ""),
            "prompt": prompt_excerpt(r.get("prompt")),  # the report's misranked pairs show it
            # a mixture's rows name their dataset (data.sources[].name): accuracy per dataset
            **({"source": r["source"]} if r.get("source") else {}),
        }
        for i, r in enumerate(rows)
    ]
