"""The composite's components that hold weights or call one: a trained reward model (`kind: model`) and an LLM
judge on an endpoint (`kind: judge`), with what `rmspec plan` shows they cost. Light: no torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from rmspec.spec.base import Section
from rmspec.spec.composite_component import ComponentBase, compiles

WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")


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
        return compiles(pattern, groups=1)
