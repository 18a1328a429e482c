"""`approach: {kind: composite}`: a reward built without training, from verifiable rules, LLM judges
and trained models, combined by weights, gates and routes.

The settings of each component kind live here (light: the spec side validates them without
importing anything heavy); what each kind computes lives in one module per kind under
`rmspec.composite.components`, looked up by the same `kind`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from rmspec.spec.base import Section

FAILURE_REASONS = ("timeout", "parse_error", "no_reference", "endpoint_error", "invalid_output")
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"
# Keys the composite writes beside its components' values: `rmspec score` (reward, gate,
# `<name>_error`), serve's extra_logs (gated, `<name>_<reason>`), verl's compute_score (score,
# `<name>_failed`). A component may not be named like one of them, or like another's derived key.
RESERVED_NAMES = ("reward", "score", "gate", "gated")
DERIVED_SUFFIXES = ("error", "failed", *FAILURE_REASONS)
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")
MATH_WORKERS = 2  # rmspec.composite.components.context.Context.math_workers


def weights_gb(path: Path) -> float | None:
    """The size of a model folder's (or a run's model/) weight files, in GB; None without a config.json."""
    folder = path / "model" if (path / "model" / "config.json").is_file() else path
    if not (folder / "config.json").is_file():
        return None
    files = [f for pattern in WEIGHT_FILES for f in folder.glob(pattern)]
    return round(sum(f.stat().st_size for f in files) / 1e9, 3) if files else None


_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _files_dtype(path: Path) -> str:
    """The precision a model folder's config says its weight files hold (float32 when it says none)."""
    folder = path / "model" if (path / "model" / "config.json").is_file() else path
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "float32"
    named = config.get("dtype") or config.get("torch_dtype")
    return named if named in _BYTES else "float32"


def _compiles(pattern: str, groups: int = 0) -> str:
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


class ModelComponent(ComponentBase):
    """A trained reward model, scored by the engine behind `rmspec score`."""

    kind: Literal["model"]
    paths: ClassVar[tuple[str, ...]] = ("path",)

    def plan_costs(self, base_dir: Path) -> dict[str, Any]:
        """Device memory = its weight files on disk at the component's dtype (float32 unless `dtype`
        says otherwise), on its `device` (cpu unless named), one forward per row; with engine: vllm, in
        vLLM's own process (its precision is chosen when it starts)."""
        path = Path(self.path) if Path(self.path).is_absolute() else base_dir / self.path
        on_disk = weights_gb(path)
        if self.engine == "vllm":
            return {
                "device_memory_gb": on_disk,
                "forwards_per_row": 1,
                "where": f"{path} on a vLLM engine (its own process)",
                "device": "vllm",
                "dtype": "float32 on a CPU engine, bfloat16 on a GPU one",
            }
        # The weight files may hold another precision than the one the component loads: scale by bytes.
        scale = _BYTES[self.dtype or "float32"] / _BYTES[_files_dtype(path)]
        return {
            "device_memory_gb": None if on_disk is None else round(on_disk * scale, 3),
            "forwards_per_row": 1,
            "where": str(path),
            "device": self.device or "cpu",
            "dtype": self.dtype or "float32",
        }

    path: str = Field(
        min_length=1,
        description="An rmspec run directory or a sequence-classification reward model folder (relative to the spec).",
    )
    device: str | None = Field(
        None,
        pattern=r"^(cpu|cuda(:\d+)?|mps)$",
        description="Where the model runs: cpu, cuda, cuda:N or mps; unset: cpu (a CUDA device is used only when "
        "named). A device torch cannot see stops the command with exit 2.",
    )
    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None, description="The weights' precision; unset: float32, as `rmspec score` loads a reward model."
    )
    batch_size: PositiveInt | None = Field(
        None,
        description="Sequences per forward pass (as `rmspec score --batch-size`, sorted by length); unset: "
        "`--batch-size` of the command when given, else the engine's 32 (256 per call with engine: vllm).",
    )
    engine: Literal["torch", "vllm"] = Field(
        "torch",
        description="What computes the model's head: torch in rmspec's process, or vllm: a vLLM server rmspec "
        "starts and owns, as `rmspec serve --engine vllm` (float32 on a CPU, bfloat16 on a GPU; a model vLLM "
        "cannot host, or no vLLM environment, stops the command with exit 2). device and dtype are torch's.",
    )
    vllm_python: str | None = Field(
        None,
        description="engine: vllm: the python of vLLM's environment (as `--vllm-python`); unset: "
        "$RMSPEC_VLLM_PYTHON, else /opt/rmspec-vllm/bin/python.",
    )

    @model_validator(mode="after")
    def _engine_settings(self) -> ModelComponent:
        if self.engine == "vllm" and (self.device is not None or self.dtype is not None):
            raise ValueError(
                "device and dtype are torch settings: with engine: vllm, vLLM's environment decides (float32 on a "
                "CPU engine, bfloat16 on a GPU one, as `rmspec serve --engine vllm`); remove them, or use engine: torch"
            )
        if self.vllm_python is not None and self.engine != "vllm":
            raise ValueError("vllm_python is for engine: vllm; add engine: vllm or remove vllm_python")
        return self


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
        return _compiles(pattern)


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


class JudgeScale(Section):
    min: float = Field(1.0, description="Lowest score the rubric allows.")
    max: float = Field(10.0, description="Highest score the rubric allows.")

    @model_validator(mode="after")
    def _ordered(self) -> JudgeScale:
        if self.max <= self.min:
            raise ValueError(f"max must be greater than min (got min={self.min}, max={self.max})")
        return self


class JudgeComponent(ComponentBase):
    """An LLM judge on an OpenAI-compatible /v1/chat/completions endpoint, scoring one response."""

    kind: Literal["judge"]
    paths: ClassVar[tuple[str, ...]] = ("rubric",)  # when it names a file

    def plan_costs(self, base_dir: Path) -> dict[str, Any]:
        """One request per row, up to max_tokens completion tokens, `concurrency` in flight; the bound
        on throughput is concurrency / timeout_s rows/s when every call runs to its limit."""
        return {
            "calls_per_row": 1,
            "completion_tokens_per_row": self.max_tokens,
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "worst_rows_per_s": round(self.concurrency / self.timeout_s, 3),
            "endpoint": self.base_url,
        }

    base_url: str = Field(
        pattern=r"^https?://",
        description="The endpoint's base URL, e.g. http://127.0.0.1:8000/v1 (rmspec serve of a judge).",
    )
    model: str = Field(min_length=1, description="The `model` field of each request.")
    api_key_env: str | None = Field(
        None, description="Environment variable holding the bearer token (unset: no Authorization header)."
    )
    rubric: list[str] | str = Field(
        description="The principles the judge scores against: a list, or the path of a text file (one per line)."
    )
    scale: JudgeScale = Field(default_factory=JudgeScale, description="The scale the judge writes its score on.")
    pattern: str = Field(
        r"\[\[(-?\d+(?:\.\d+)?)\]\]",
        description="Regex whose first group is the score; the reply's LAST match is read (the judge is asked to "
        "end with its score: an earlier match echoes the instructions or quotes the response).",
    )
    temperature: float = Field(0.0, ge=0, description="Sampling temperature sent with each request.")
    max_tokens: PositiveInt = Field(256, description="The reply budget sent with each request.")
    concurrency: PositiveInt = Field(4, description="Requests in flight at once.")
    timeout_s: PositiveFloat = Field(60.0, description="Per-request limit; past it the row is counted `timeout`.")

    @field_validator("pattern")
    @classmethod
    def _one_group(cls, pattern: str) -> str:
        return _compiles(pattern, groups=1)


ComponentSettings = Annotated[
    ModelComponent | MathAnswer | RegexRule | JsonSchemaRule | LengthRule | RepetitionRule | JudgeComponent,
    Field(discriminator="kind"),
]
# The settings classes `components:` accepts, in the schema's order: the shipped ones above, then any
# registered at run time (rmspec.composite.components.register rebuilds the union through
# rmspec.spec.composite_spec.use_components).
COMPONENT_SETTINGS: list[type[ComponentBase]] = list(get_args(get_args(ComponentSettings)[0]))


def kind_of(settings: type[ComponentBase]) -> str:
    """The `kind:` value a component settings class is selected by."""
    return get_args(settings.model_fields["kind"].annotation)[0]


class Gate(Section):
    component: str = Field(description="The component that must pass.")
    threshold: float = Field(1.0, description="It passes when its value is >= threshold (rules give 1 or 0).")
    floor: float = Field(description="The reward of a row that fails the gate, whatever the other components say.")


class CompositeColumns(Section):
    prompt: str = Field("prompt", description="Column with the prompt (text or chat messages).")
    response: str = Field("response", description="Column with the response scored.")
    label: str = Field(
        "label",
        description="Column with the reference answer for rules (OpenRLHF sends it as `labels`, verl as `ground_truth`).",
    )


class Composite(Section):
    """A reward from components: trains nothing; `rmspec run` fits normalisation and evaluates it."""

    kind: Literal["composite"]
    components: list[ComponentSettings] = Field(min_length=1, description="The parts of the reward.")
    combine: Literal["weighted_sum", "weighted_mean"] = Field(
        "weighted_sum",
        description="sum(w_i x v_i), or that divided by the sum of the absolute weights used on the row.",
    )
    gates: list[Gate] = Field(
        default_factory=list, description="Components that must pass, else the reward is the floor."
    )
    route_by: str | None = Field(
        None, description="A column (e.g. verl's data_source) whose value picks the components of each row (routes)."
    )
    routes: dict[str, list[str]] = Field(
        default_factory=dict, description="route_by value -> the component names used for such rows."
    )
    default_route: list[str] | None = Field(
        None, description="The components for a row whose route_by value is not in routes (needed with route_by)."
    )
    on_failure: OnFailure = Field(
        "error",
        description="A failed component: error (the row is rejected with the reason), skip (left out, the "
        "remaining weights renormalised to their original total of absolute weights) or {value: X} (it takes X).",
    )
    columns: CompositeColumns = Field(default_factory=CompositeColumns, description="Where rows hold each role.")
    end_tokens: list[str] = Field(
        default_factory=lambda: ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>", "<eos>", "[SEP]"],
        description="Text removed from the end of a response that OpenRLHF sends inside its query (the decoded EOS).",
    )

    @model_validator(mode="after")
    def _names(self) -> Composite:
        names = [c.name for c in self.components]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"component names must be unique; repeated: {', '.join(duplicates)}")
        taken = [n for n in names if n in RESERVED_NAMES]
        if taken:
            raise ValueError(
                f"component name {taken[0]!r} is a key of the composite's own output "
                f"({', '.join(RESERVED_NAMES)}): rename the component"
            )
        for name in names:  # `<name>_error` (rmspec score), `<name>_<reason>` (serve), `<name>_failed` (verl)
            clash = next((f"{name}_{s}" for s in DERIVED_SUFFIXES if f"{name}_{s}" in names), None)
            if clash is not None:
                raise ValueError(
                    f"component name {clash!r} is also the key of component {name!r}'s failures in the "
                    f"composite's output ({name}_error, {name}_failed, {name}_<reason>): rename one of them"
                )
        known = set(names)
        for where, used in [
            ("gates", [g.component for g in self.gates]),
            *((f"routes.{key}", value) for key, value in self.routes.items()),
            ("default_route", self.default_route or []),
        ]:
            unknown = [n for n in used if n not in known]
            if unknown:
                raise ValueError(
                    f"{where} names no component {', '.join(map(repr, unknown))}; known: {', '.join(names)}"
                )
        if self.route_by is None and (self.routes or self.default_route is not None):
            raise ValueError("routes/default_route need route_by (the column that picks the route)")
        if self.route_by is not None and self.default_route is None:
            raise ValueError("route_by needs default_route: the components for rows whose value has no route")
        if self.combine == "weighted_mean" and sum(c.weight for c in self.components) == 0:
            raise ValueError("weighted_mean needs at least one non-zero weight")
        return self
