"""How far bfloat16 moves a reward model's rewards: vLLM (its CPU build here) in float32 and bfloat16,
and transformers in bfloat16, each against transformers in float32, on the same token ids.
The figures behind the bfloat16 tolerance of `rmspec export --to vllm --check --dtype bfloat16`
(rmspec.export.check_dtype; bench/results/vllm_bf16_drift.md).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/vllm_bf16_drift.py FOLDER [--run RUN] [--rows 32]

FOLDER: a model folder with vLLM's pooling files (an `rmspec export --to vllm` folder, or a run's model
folder with `modules.json` + `1_Pooling/` copied from one). --run: take the token ids training used
from RUN's validation split (both responses of pairs spread over it), else 32 synthetic chat
conversations rendered by FOLDER's template. vLLM runs from --vllm-python (default
/opt/rmspec-vllm/bin/python) in a subprocess: this file's `worker` mode. Ids go to vLLM as token
prompts, so the read point is not in question here, only the precision.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def synthetic_ids(folder: Path, n: int) -> list[list[int]]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    rng = random.Random(1)
    words = [
        "sky",
        "blue",
        "river",
        "sea",
        "town",
        "valley",
        "water",
        "clear",
        "day",
        "rivers",
        "the",
        "a",
        "of",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
    ]
    ids = []
    for _ in range(n):
        prompt = " ".join(rng.choice(words) for _ in range(rng.randint(3, 30)))
        reply = " ".join(rng.choice(words) for _ in range(rng.randint(1, 60)))
        chat = [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]
        ids.append(tok(tok.apply_chat_template(chat, tokenize=False), add_special_tokens=False)["input_ids"])
    return ids


def run_ids(run: Path, n: int) -> list[list[int]]:
    """chosen/rejected token ids of pairs spread evenly over RUN's validation split."""
    import datasets

    fingerprint = json.loads((run / "data_report.json").read_text())["fingerprint"]
    split = datasets.load_from_disk(str(run / "cache" / fingerprint / "validation"))
    k = min(len(split), n // 2)
    ids = []
    for i in (j * len(split) // k for j in range(k)):
        ids += [split[i]["chosen_input_ids"], split[i]["rejected_input_ids"]]
    return ids


def transformers_rewards(folder: Path, ids: list[list[int]], dtype: str) -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
    with torch.no_grad():
        return [model(torch.tensor([row])).logits[0, 0].float().item() for row in ids]


def worker(folder: str, ids_file: str, out_file: str, dtypes: list[str]) -> None:
    """In vLLM's environment: the rewards vLLM gives the ids in each dtype."""
    from vllm import LLM
    from vllm.inputs import TokensPrompt

    ids = json.loads(Path(ids_file).read_text())
    out = {}
    for dtype in dtypes:
        t0 = time.time()
        llm = LLM(model=folder, runner="pooling", dtype=dtype, max_model_len=max(map(len, ids)), enforce_eager=True)
        answers = llm.classify([TokensPrompt(prompt_token_ids=row) for row in ids])
        out[f"vllm {dtype}"] = [a.outputs.probs[0] for a in answers]
        print(f"vllm {dtype}: {time.time() - t0:.0f} s", file=sys.stderr)
        del llm
    Path(out_file).write_text(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--run", type=Path)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--vllm-python", default="/opt/rmspec-vllm/bin/python")
    args = parser.parse_args()
    ids = run_ids(args.run, args.rows) if args.run else synthetic_ids(args.folder, args.rows)
    rewards = {dtype: transformers_rewards(args.folder, ids, dtype) for dtype in ("float32", "bfloat16")}
    with tempfile.TemporaryDirectory() as tmp:
        ids_file, out_file = Path(tmp) / "ids.json", Path(tmp) / "out.json"
        ids_file.write_text(json.dumps(ids))
        subprocess.run(
            [args.vllm_python, __file__, "worker", str(args.folder), str(ids_file), str(out_file)],
            check=True,
            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")},
        )
        found = {f"transformers {k}": v for k, v in rewards.items()} | json.loads(out_file.read_text())
    reference = found["transformers float32"]
    scale = max(1.0, *(abs(x) for x in reference))
    pairs = range(0, len(reference) - 1, 2)
    print(f"{len(ids)} rows, rewards {min(reference):.3g} to {max(reference):.3g}, scale {scale:.3g}")
    print("| engine | largest difference from transformers float32 | of the scale | pairs in the same order |")
    print("|---|---|---|---|")
    for name, values in found.items():
        worst = max(abs(a - b) for a, b in zip(values, reference, strict=True))
        same = sum((values[i] > values[i + 1]) == (reference[i] > reference[i + 1]) for i in pairs)
        print(f"| {name} | {worst:.3g} | {worst / scale:.2%} | {same} of {len(pairs)} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4], ["float32", "bfloat16"])
    else:
        main()
