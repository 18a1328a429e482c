"""What every component of `approach: {kind: composite}` has in common (a name, a weight, a normalisation,
a failure policy), and the failure reasons a component can end with. Light: the spec side only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from rmspec.spec.base import Section

FAILURE_REASONS = ("timeout", "parse_error", "no_reference", "endpoint_error", "invalid_output")
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"


def compiles(pattern: str, groups: int = 0) -> str:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    if compiled.groups < groups:
        raise ValueError(f"the pattern {pattern!r} needs a capture group around the value it reads")
    return pattern


class OnFailureValue(Section):
    value: float = Field(description="The value a failed component takes (still counted as a failure).")


OnFailure = Literal["error", "skip"] | OnFailureValue


class ComponentBase(Section):
    name: str = Field(
        pattern=NAME_PATTERN,
        description="The component's name: its column in `rmspec score` output, its key in extra_logs and metrics "
        "(not reward, score, gate or gated, nor another component's name followed by _error, _failed or "
        "_<failure reason>).",
    )
    weight: float = Field(1.0, description="Its weight in the combination (0 keeps it as a gate or a log only).")
    normalize: Literal["none", "zscore", "minmax"] = Field(
        "none",
        description="Rescale its values before combining: zscore or minmax with statistics fitted on the "
        "training split by `rmspec run` (written to RUN/reward.yaml).",
    )
    on_failure: OnFailure | None = Field(
        None, description="This component's failure policy, in place of the composite's `on_failure`."
    )
    # (extra, import name) of the optional package its scoring imports (rmspec.extras checks it before a
    # run or an eval starts); None: the base install scores it.
    needs: ClassVar[tuple[str, str] | None] = None
    # The fields holding a path relative to the spec (a model, a tokenizer, a schema or rubric file):
    # RUN/reward.yaml writes them absolute (rmspec.composite.reward_file).
    paths: ClassVar[tuple[str, ...]] = ()

    def plan_costs(self, base_dir: Path) -> dict[str, Any]:
        """What `rmspec plan` shows it costs, from the spec and the files alone (rmspec.composite.plan):
        by default computed in process, no device memory."""
        return {"device_memory_gb": 0.0, "where": "in process"}
