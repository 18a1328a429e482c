"""What an artifact only repeats from the spec, removed before the field walker compares it: a field
must change what rmspec decided or did, not the copy of itself that an artifact carries."""

from __future__ import annotations

from typing import Any


def plan_without_echoes(plan: dict) -> dict:
    """plan.json less what only repeats the spec (its hash, the --set list, the model's name, shape and LoRA
    settings, the hardware section): a field must change what the plan decided, not its echo."""
    out = {k: v for k, v in plan.items() if k not in ("spec_hash", "sets", "hardware")}
    out["model"] = {k: v for k, v in plan["model"].items() if k.endswith("parameters")}
    return out


def model_config_without_echoes(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """A saved model's config.json less its `rmspec` block (the spec's approach settings copied in for the
    scorer): what is left is what the run made (architecture, labels, reward statistics)."""
    if config is None:
        return None
    return {k: v for k, v in config.items() if k != "rmspec"}
