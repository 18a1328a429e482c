"""The composite's verifiable rules: a math answer (math-verify), a regular expression, a JSON schema, a length
and a repetition penalty, each 1/0 or a bounded penalty computed in process. Light: the settings only; what
each computes lives in rmspec.composite.components.<kind>."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from rmspec.spec.composite_component import ComponentBase, compiles

MATH_WORKERS = 2  # rmspec.composite.components.context.Context.math_workers


class MathAnswer(ComponentBase):
    """1 when the response's final answer equals the reference under math-verify (gold first), else 0."""

    kind: Literal["math_answer"]
    needs: ClassVar[tuple[str, str] | None] = ("rules", "math_verify")

    def plan_costs(self, base_dir: Path) -> dict[str, Any]:
        """One math-verify call per row in the pool; worst case workers / timeout_s rows/s."""
        return {
            "processes": MATH_WORKERS,
            "timeout_s": self.timeout_s,
            "worst_rows_per_s": round(MATH_WORKERS / self.timeout_s, 3),
        }

    timeout_s: PositiveFloat = Field(
        5.0, description="Wall-clock limit per answer; past it the worker is replaced and the row counted `timeout`."
    )


class RegexRule(ComponentBase):
    """1 when the response matches the pattern, else 0 (format rewards)."""

    kind: Literal["regex"]
    pattern: str = Field(description="A Python regular expression, e.g. ^<think>.*?</think>\\s*<answer>.*?</answer>$.")
    match: Literal["full", "search"] = Field(
        "full", description="full: the whole response must match (re.fullmatch); search: anywhere (re.search)."
    )
    dotall: bool = Field(True, description="`.` also matches newlines (re.DOTALL).")

    @field_validator("pattern")
    @classmethod
    def _valid(cls, pattern: str) -> str:
        return compiles(pattern)


class JsonSchemaRule(ComponentBase):
    """1 when the response (or its fenced ```json block) is JSON valid under the schema, else 0."""

    kind: Literal["json_schema"]
    needs: ClassVar[tuple[str, str] | None] = ("rules", "jsonschema")
    paths: ClassVar[tuple[str, ...]] = ("json_schema",)  # when it names a file
    json_schema: dict[str, Any] | str = Field(
        alias="schema",
        description="The JSON Schema inline (a mapping), or the path of a .json file holding it (relative to the spec).",
    )
    fenced: bool = Field(
        True, description="Read the first ```json fenced block when the response has one, else the whole response."
    )


class LengthRule(ComponentBase):
    """A length reward in tokens of a named tokenizer: DAPO's soft overlong punishment or a target length."""

    kind: Literal["length"]
    paths: ClassVar[tuple[str, ...]] = ("tokenizer",)
    tokenizer: str = Field(
        min_length=1, description="A tokenizer folder or model (relative to the spec), e.g. the policy's."
    )
    mode: Literal["overlong", "target"] = Field(
        "overlong",
        description="overlong (DAPO): 0 up to max_tokens - cache_tokens, then linear down to -1 at max_tokens, "
        "-1 beyond; target: -|L - target_tokens| / target_tokens, floored at -1.",
    )
    max_tokens: PositiveInt | None = Field(None, description="overlong: the response budget L_max.")
    cache_tokens: PositiveInt | None = Field(None, description="overlong: the soft punishment interval L_cache.")
    target_tokens: PositiveInt | None = Field(None, description="target: the wanted length.")

    @model_validator(mode="after")
    def _settings(self) -> LengthRule:
        if self.mode == "overlong":
            if self.max_tokens is None or self.cache_tokens is None:
                raise ValueError("mode overlong needs max_tokens and cache_tokens (DAPO: 20480 and 4096)")
            if self.cache_tokens > self.max_tokens:
                raise ValueError("cache_tokens must not exceed max_tokens")
            if self.target_tokens is not None:
                raise ValueError("target_tokens is for mode: target")
        elif self.target_tokens is None or self.max_tokens is not None or self.cache_tokens is not None:
            raise ValueError("mode target takes target_tokens only (max_tokens/cache_tokens are for mode: overlong)")
        return self


class RepetitionRule(ComponentBase):
    """An n-gram repetition penalty: (1 - distinct n-grams / n-grams) x max_penalty over lowercased words."""

    kind: Literal["repetition"]
    ngram: PositiveInt = Field(3, description="n-gram size, in whitespace-separated words.")
    max_penalty: float = Field(-1.0, le=0, description="The value of a fully repeated response (<= 0).")
