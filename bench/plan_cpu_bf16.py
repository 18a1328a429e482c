"""Whether bf16 autocast pays on this CPU (it lists avx512_bf16/amx_bf16), for the planner's precision choice.

    python bench/plan_cpu_bf16.py   # -> bench/results/plan_cpu_bf16.md

Times, in fp32 and under bf16 autocast on this machine's CPU: the MLP matmuls of a MiniLM
layer alone, and a whole MiniLM reward-model training step (16 pairs x 128 tokens, AdamW).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def step_time(
    dtype: torch.dtype | None, tokens: int = 4096, hidden: int = 384, inner: int = 1536, repeats: int = 5
) -> float:
    torch.manual_seed(0)
    x = torch.randn(tokens, hidden)
    w1 = torch.randn(hidden, inner, requires_grad=True)
    w2 = torch.randn(inner, hidden, requires_grad=True)

    def once() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
            y = torch.nn.functional.gelu(x @ w1) @ w2
        y.float().sum().backward()

    once()
    start = time.perf_counter()
    for _ in range(repeats):
        once()
    return (time.perf_counter() - start) / repeats


def full_step_time(bf16: bool, pairs: int = 16, seq: int = 128, repeats: int = 3) -> float:
    from transformers import BertConfig, BertForSequenceClassification

    from rmspec.packaged import resolve_model_path

    torch.manual_seed(0)
    config = BertConfig.from_pretrained(
        resolve_model_path("sentence-transformers/all-MiniLM-L6-v2"),
        num_labels=1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = BertForSequenceClassification(config)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(1000, 20000, (2 * pairs, seq))

    def once() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            scores = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.float()
        chosen, rejected = scores.view(2, -1)
        (-torch.nn.functional.logsigmoid(chosen - rejected)).mean().backward()
        optim.step()
        optim.zero_grad()

    once()
    start = time.perf_counter()
    for _ in range(repeats):
        once()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    listed = [f for f in ("avx512_bf16", "amx_bf16", "amx_tile") if f in flags.split()]
    fp32, bf16 = step_time(None), step_time(torch.bfloat16)
    full_fp32, full_bf16 = full_step_time(False), full_step_time(True)
    import os

    load = os.getloadavg()[0]
    lines = [
        "# bf16 autocast vs fp32 on this CPU",
        "",
        f"`python bench/plan_cpu_bf16.py` (torch {torch.__version__}, {torch.get_num_threads()} threads). "
        f"CPU flags listed: {', '.join(listed) or 'none'}. MLP block of a MiniLM layer (4096 tokens, 384 -> 1536 -> 384), "
        "forward and backward, mean of 5.",
        "",
        f"Load average at the end: {load:.1f} (the machine is shared; timings are indicative).",
        "",
        "| work | fp32 s | bf16 autocast s | bf16 / fp32 |",
        "|---|---|---|---|",
        f"| MLP matmuls of one layer, fwd+bwd | {fp32:.4f} | {bf16:.4f} | {bf16 / fp32:.2f}x |",
        f"| MiniLM RM training step, 16 pairs x 128 | {full_fp32:.3f} | {full_bf16:.3f} | {full_bf16 / full_fp32:.2f}x |",
        "",
        "The matmuls gain from the CPU's bf16 units; a whole step gains less (non-matmul ops, casts and the",
        "optimizer stay fp32). So the planner picks bf16 autocast on a CPU when `device: auto` finds",
        "avx512_bf16/amx_bf16 in /proc/cpuinfo, and fp32 for `device: cpu` (the catalog's conservative",
        "default, which the quickstart spec uses) unless the spec sets `hardware.bf16: true`.",
    ]
    (REPO / "bench" / "results" / "plan_cpu_bf16.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
