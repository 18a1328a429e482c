"""Time preparing the embedded demo data (specs/quickstart.yaml), cold and from the cache.

python bench/data_demo.py [--repeat 3] [--out bench/results/data_demo.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "data_demo.md"))
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t_import = time.time()
    import datasets

    datasets.disable_progress_bars()
    datasets.disable_caching()  # every cold run recomputes its maps (datasets would reuse them by fingerprint)
    from rmspec.data import prepare
    from rmspec.data.tokenizer import load_tokenizer
    from rmspec.spec import load_spec

    loaded = load_spec(REPO / "specs" / "quickstart.yaml")
    tokenizer = load_tokenizer(loaded)
    t_import = time.time() - t_import
    cold, warm = [], []
    report = None
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.time()
            prepared = prepare(loaded, tokenizer, cache_dir=tmp, rejects_path=Path(tmp) / "rejects.jsonl")
            cold.append(time.time() - t0)
            report = prepared.report.to_json()
            t0 = time.time()
            again = prepare(loaded, tokenizer, cache_dir=tmp)
            warm.append(time.time() - t0)
            assert again.report.cached
    lines = [
        "# Preparing the demo data (specs/quickstart.yaml)",
        "",
        f"Command: `python bench/data_demo.py --repeat {args.repeat}`",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPU cores shared with other jobs, datasets {datasets.__version__}",
        f"- data: {report['rows_read']:,} pairs -> train {report['splits']['train']:,}, validation {report['splits']['validation']:,}; "
        f"rejected {sum(report['rejected'].values())}; counts reconcile: {report['reconciled']}",
        f"- length-heuristic accuracy (longer response = chosen, MiniLM tokens): {report['length_heuristic_accuracy']:.4f}",
        "- per family: " + ", ".join(f"{g} {d['length_heuristic_accuracy']:.3f}" for g, d in report["groups"].items()),
        "",
        "| run | seconds (median of runs) | all runs |",
        "|---|---|---|",
        f"| imports + tokenizer load (once) | {t_import:.1f} | |",
        f"| prepare, cold (map, filters, tokenize, split, report, cache write; datasets' map cache off) | {statistics.median(cold):.2f} | "
        f"{', '.join(f'{x:.2f}' for x in cold)} |",
        f"| prepare, warm (cache hit: load_from_disk) | {statistics.median(warm):.2f} | {', '.join(f'{x:.2f}' for x in warm)} |",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
