"""Prepare N generated pairs (default 1,000,000) through the streaming path; report time and peak RSS.

    python bench/data_streaming.py [--pairs 1000000] [--out bench/results/data_streaming.md]

The pairs are the demo preferences repeated with a numbered prompt suffix (so every prompt is
distinct), written as JSON Lines in a hub-style folder and read with `kind: huggingface,
streaming: true`: rows are mapped on the fly and written to Arrow in batches, then filtered,
tokenized with the MiniLM tokenizer (max 256), split 99/1 by prompt. Everything it writes
(data, datasets cache) lives in a temporary folder that is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def memory_mb() -> dict[str, float]:
    """VmRSS, and its parts: RssAnon (the process's own memory) and RssFile (pages of memory-mapped
    files such as Arrow data, which the kernel can drop and re-read)."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
    return out


def rss_mb() -> float:
    return memory_mb().get("VmRSS", 0.0)


class PeakSampler(threading.Thread):
    """Samples this process's memory (the children's peak RSS comes from getrusage at the end)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0.0
        self.peak_anon = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            mem = memory_mb()
            self.peak = max(self.peak, mem.get("VmRSS", 0.0))
            self.peak_anon = max(self.peak_anon, mem.get("RssAnon", 0.0))
            time.sleep(0.2)


def write_pairs(folder: Path, n: int) -> float:
    demo = [json.loads(line) for line in (REPO / "rmspec/data/demo/preferences.jsonl").read_text().splitlines()]
    (folder / "data").mkdir(parents=True)
    shard_rows = 100_000
    for shard in range((n + shard_rows - 1) // shard_rows):
        with open(folder / "data" / f"train-{shard:05d}.jsonl", "w") as fh:
            for i in range(shard * shard_rows, min(n, (shard + 1) * shard_rows)):
                row = demo[i % len(demo)]
                fh.write(
                    json.dumps(
                        {
                            "id": f"b{i}",
                            "prompt": f"{row['prompt']} (#{i})",
                            "chosen": row["chosen"],
                            "rejected": row["rejected"],
                            "family": row["family"],
                        }
                    )
                    + "\n"
                )
    return sum(f.stat().st_size for f in (folder / "data").iterdir()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "data_streaming.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rmspec-bench-") as tmp:
        tmp = Path(tmp)
        os.environ["HF_DATASETS_CACHE"] = str(tmp / "hf-cache")  # before datasets is imported
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        t0 = time.time()
        size_mb = write_pairs(tmp / "pairs", args.pairs)
        t_write = time.time() - t0
        spec = {
            "version": 1,
            "name": "bench",
            "model": {"name_or_path": "sentence-transformers/all-MiniLM-L6-v2"},
            "data": {
                "source": {"kind": "huggingface", "path": "pairs", "split": "train", "streaming": True},
                "mapping": {"preset": "pairs", "columns": {"group": "family"}},
                "filters": [
                    {"kind": "drop_empty"},
                    {"kind": "drop_identical"},
                    {"kind": "max_length", "policy": "truncate_prompt_left"},
                ],
                "split": {"validation_fraction": 0.01, "seed": 0},
            },
            "approach": {"kind": "bradley_terry"},
            "training": {"max_length": 256},
            "hardware": {"device": "cpu"},
        }
        (tmp / "spec.yaml").write_text(json.dumps(spec))

        import datasets

        datasets.disable_progress_bars()
        from rmspec.data import prepare
        from rmspec.data.tokenizer import load_tokenizer
        from rmspec.spec import load_spec

        loaded = load_spec(tmp / "spec.yaml")
        tokenizer = load_tokenizer(loaded)
        base = rss_mb()
        base_anon = memory_mb().get("RssAnon", 0.0)
        sampler = PeakSampler()
        sampler.start()
        t1 = time.time()
        prepared = prepare(loaded, tokenizer, rejects_path=tmp / "rejects.jsonl", cache_dir=tmp / "cache")
        seconds = time.time() - t1
        sampler.stop.set()
        sampler.join()
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        report = prepared.report.to_json()
        lines = [
            "# Data pipeline: streaming 1M pairs",
            "",
            f"Command: `python bench/data_streaming.py --pairs {args.pairs}`",
            "",
            f"- machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared with other jobs), "
            f"Python {platform.python_version()}, datasets {datasets.__version__}",
            f"- input: {args.pairs:,} pairs as JSON Lines, {size_mb:,.0f} MiB in {len(list((tmp / 'pairs' / 'data').iterdir()))} shards "
            f"(written in {t_write:.0f} s, not counted below)",
            "- path: `kind: huggingface, streaming: true` -> map on the fly -> Arrow on disk in batches -> "
            "drop_empty, drop_identical, max_length (truncate_prompt_left, 256, MiniLM tokenizer) -> 1% grouped split",
            "",
            "| measure | value |",
            "|---|---|",
            f"| rows read | {report['rows_read']:,} |",
            f"| rows kept | {report['rows_kept']:,} (train {report['splits'].get('train', 0):,}, validation {report['splits'].get('validation', 0):,}) |",
            f"| rejected | {report['rejected'] or 0} |",
            f"| counts reconcile | {report['reconciled']} |",
            f"| wall time of prepare() | {seconds:,.0f} s ({report['rows_read'] / seconds:,.0f} pairs/s) |",
            f"| peak RSS, main process | {sampler.peak:,.0f} MiB (after imports and tokenizer: {base:,.0f} MiB) |",
            f"| peak anonymous memory (RssAnon), main process | {sampler.peak_anon:,.0f} MiB (after imports: {base_anon:,.0f} MiB; RSS minus memory-mapped file pages) |",
            f"| peak RSS, largest worker process | {children:,.0f} MiB |",
            f"| length heuristic | {report['length_heuristic_accuracy']} |",
            "",
            "Memory is bounded in the text: rows stream from the files into Arrow on disk and every stage is a",
            "batched map over memory-mapped data. RSS also counts the pages of those memory-mapped Arrow files",
            "that were read (the kernel drops them under pressure); the process's own memory is RssAnon.",
            "What grows with the row count is small per-row state: the reject-reason, prompt-hash and length",
            "columns read for the split, the counts and the report, and the duplicate-rate hashes (on the",
            "order of a few hundred bytes per row, no text).",
        ]
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
