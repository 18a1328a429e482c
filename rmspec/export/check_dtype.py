"""The precision `rmspec export --to vllm --check` starts vLLM in, and the tolerance it judges by.

`--dtype auto` (the default) asks vLLM's environment whether torch sees a GPU: bfloat16 there (what verl
and most GPU deployments run), float32 on a CPU engine (what `serve.sh` runs). The reference is always
`rmspec score` in float32: the reward rmspec evaluated, and the one an RL run should optimise.

- float32: |vLLM - rmspec score| <= 1e-4 on every row (measured here: 1.5e-5 on rewards near -90, two
  fp32 ulps: the same arithmetic in another order).
- bfloat16: |vLLM - rmspec score| <= 0.15 x scale on every row, where scale = max(1, the largest
  |rmspec score| among the check rows). bfloat16 keeps 8 significant bits (relative rounding 2^-9), and
  the error of a reward is a sum of rounded hidden-state terms, so it grows with the size of those
  terms, not with how close one reward is to 0: a per-row relative rule would fail every reward near 0.
  Measured with vLLM 0.32's CPU build in bfloat16 against float32 (docs/score_and_serve.md): 1.0-1.4%
  of the scale on 2-layer models, 6.8% on a 30-layer SmolLM2-135M reward model (transformers' own
  bfloat16 forward of the same model: 6.2%, so this is the precision, not vLLM); 0.15 is about twice the
  largest, for deeper models. It still fails a misread token that moves rewards by a sizeable part of
  their scale (the double-BOS form of a trained Llama: 26%), not a smaller one (another Llama's: 0.7%):
  the read point is proven by the float32 check; bfloat16 only bounds the precision's drift. The report
  also gives the share of pairs whose order (chosen above rejected) vLLM keeps.

A CPU engine in bfloat16 needs native bfloat16 instructions (avx512_bf16 or AMX on x86, bf16 on Arm),
checked on this machine, where the engine runs: without them the path is unmeasured here and torch
emulates bfloat16 many times slower than float32, so `--dtype bfloat16` is refused (exit 2).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from rmspec.errors import RmspecError

DTYPES = ("auto", "float32", "bfloat16")
TOLERANCE_FP32 = 1e-4
BF16_RELATIVE = 0.15
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
DEVICE_PROBE = "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')"


@dataclass(frozen=True)
class Tolerance:
    """How far vLLM may be from `rmspec score` in one precision."""

    dtype: str
    relative: bool  # bfloat16: a fraction of the rows' reward scale; float32: absolute

    @property
    def value(self) -> float:
        return BF16_RELATIVE if self.relative else TOLERANCE_FP32

    def scale(self, expected: list[float]) -> float:
        return max([1.0, *(abs(x) for x in expected)]) if self.relative else 1.0

    def bound(self, expected: list[float]) -> float:
        """The largest difference allowed on these rows."""
        return self.value * self.scale(expected)

    @property
    def rule(self) -> str:
        if self.relative:
            return (
                f"|vLLM - rmspec score (float32)| <= {BF16_RELATIVE:g} x max(1, max |rmspec score|) on every row "
                "(bfloat16 rounds hidden states to 8 significant bits; the error follows their size, not the "
                "reward's distance from 0)"
            )
        return f"|vLLM - rmspec score| <= {TOLERANCE_FP32:g} on every row (float32)"


def tolerance(dtype: str) -> Tolerance:
    return Tolerance(dtype, relative=dtype == "bfloat16")


def engine_device(python: str) -> str:
    """'cuda' when torch in vLLM's environment sees a GPU, else 'cpu'; a broken environment is exit 2."""
    probe = subprocess.run([python, "-c", DEVICE_PROBE], capture_output=True, text=True, timeout=300)
    answer = (probe.stdout.strip().splitlines() or [""])[-1]
    if probe.returncode != 0 or answer not in ("cuda", "cpu"):
        last = (probe.stderr.strip().splitlines() or [answer or "(no output)"])[-1]
        raise RmspecError(
            f"the vLLM environment {python} is broken: importing torch there fails: {last}",
            "reinstall it with `bash .ci/install_vllm.sh`, or name another with --vllm-python",
        )
    return answer


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """This machine's CPU flags (Linux), or None where they cannot be read."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def bf16_refusal(flags: frozenset[str] | None) -> RmspecError | None:
    """Why a CPU engine cannot be checked in bfloat16 on a CPU with these flags, or None."""
    if flags is None or flags & BF16_FLAGS:
        return None
    return RmspecError(
        "--dtype bfloat16 on a CPU engine: this CPU has no native bfloat16 instructions (avx512_bf16, amx_bf16 "
        "or Arm bf16); vLLM's CPU bfloat16 path is unmeasured without them and torch emulates bfloat16 many "
        "times slower than float32",
        "check in float32 here (--dtype float32, what serve.sh runs), or run the check where vLLM has a GPU",
    )


def choose(dtype: str, device: str, flags: frozenset[str] | None) -> tuple[str, str]:
    """(the dtype to check, why): `auto` is bfloat16 on a GPU engine and float32 on a CPU one."""
    if dtype not in DTYPES:
        raise RmspecError(f"--dtype {dtype}: not one of {', '.join(DTYPES)}", "use --dtype float32 or bfloat16")
    if dtype == "auto":
        chosen = "bfloat16" if device == "cuda" else "float32"
        return chosen, f"--dtype auto: vLLM's environment has {'a GPU' if device == 'cuda' else 'no GPU'}"
    if dtype == "bfloat16" and device == "cpu":
        refused = bf16_refusal(flags)
        if refused is not None:
            raise refused
    return dtype, f"--dtype {dtype}"
