"""The plan's check of a process reward model's step separator: how the model's tokenizer cuts it.

The label of each step sits on the separator's last token, so the separator must give at least
one token, and the same tokens every time: rmspec tokenizes it once, alone, and appends those ids
after every step (as TRL's PRMTrainer does), so a separator that tokenizes to a fixed sequence is
fixed by construction; one that tokenizes to nothing (BERT-family tokenizers drop newlines) is a
PlanError with a fix. The check reads the model's `tokenizer.json` with the `tokenizers` library
(no torch, no transformers): from a local folder or the Hugging Face cache; where neither has it
(a hub model not yet downloaded) the plan says the check waits for the data stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.errors import PlanError
from rmspec.plan.shape_source import hf_cache_config


def tokenizer_file(name_or_path: str, model_path: str, hub_cache: Path | None = None) -> Path | None:
    local = Path(model_path) / "tokenizer.json"
    if local.is_file():
        return local
    config = hf_cache_config(name_or_path, hub_cache)
    if config is not None and (config.parent / "tokenizer.json").is_file():
        return config.parent / "tokenizer.json"
    return None


def separator_check(
    separator: str, name_or_path: str, model_path: str, hub_cache: Path | None = None
) -> dict[str, Any]:
    """{separator, tokens, ids, how} for the plan; raises PlanError when it gives no token."""
    path = tokenizer_file(name_or_path, model_path, hub_cache)
    if path is None:
        return {
            "separator": separator,
            "tokens": None,
            "ids": None,
            "how": "not checked here: the tokenizer is not on this machine (checked when the data is prepared)",
        }
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_padding()  # some tokenizer.json files pad to a fixed length (MiniLM's: 128)
    tok.no_truncation()
    enc = tok.encode(separator, add_special_tokens=False)
    if not enc.ids:
        raise PlanError(
            f"approach.step_separator {separator!r} tokenizes to nothing with {name_or_path}'s "
            "tokenizer, so a step's label would have no token of its own",
            hint='choose a separator it keeps, e.g. --set "approach.step_separator= ;" (encoders drop newlines)',
        )
    how = (
        f"one token {enc.tokens[0]!r} (id {enc.ids[0]})"
        if len(enc.ids) == 1
        else f"a fixed sequence of {len(enc.ids)} tokens {enc.tokens} (ids {enc.ids}); the label sits on the last"
    )
    return {
        "separator": separator,
        "tokens": list(enc.tokens),
        "ids": list(enc.ids),
        "how": how + "; tokenized once, alone, and appended after every step",
    }
