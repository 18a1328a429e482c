"""Demo data for dataset mixtures (issue 20): `rmspec/data/demo/mixture_hh.parquet`, a second
preference set in another format and layout than preferences.jsonl: Parquet, in Anthropic
hh-rlhf's shape (whole transcripts "\\n\\nHuman: ...\\n\\nAssistant: ..." in `chosen` and
`rejected`, the prompt being their shared prefix).

The pairs are make_demo_data's families drawn with their own seed, no prompt shared with
preferences.jsonl or the benchmark, with the same 3% label noise; a `family` column carries the
group. Run: `.venv/bin/python scripts/demo_mixture.py` (writes the file; --check prints only).
"""

from __future__ import annotations

import argparse
import importlib.util
from collections import Counter
from pathlib import Path

MIXTURE_SEED, N_MIXTURE = 4801, 1200
OUT = Path(__file__).resolve().parent.parent / "rmspec" / "data" / "demo" / "mixture_hh.parquet"


def base():
    spec = importlib.util.spec_from_file_location("make_demo_data", Path(__file__).with_name("make_demo_data.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows() -> list[dict]:
    demo = base()
    train = demo.make_pairs(demo.TRAIN_SEED, demo.N_TRAIN, demo.LABEL_NOISE)
    bench = demo.make_pairs(demo.BENCH_SEED, demo.N_BENCH, 0.0, exclude_prompts={r["prompt"] for r in train})
    taken = {r["prompt"] for r in train} | {r["prompt"] for r in bench}
    pairs = demo.make_pairs(MIXTURE_SEED, N_MIXTURE, demo.LABEL_NOISE, exclude_prompts=taken)
    out = []
    for i, r in enumerate(pairs):
        head = f"\n\nHuman: {r['prompt']}\n\nAssistant: "
        out.append(
            {"id": f"hh-{i:05d}", "chosen": head + r["chosen"], "rejected": head + r["rejected"], "family": r["family"]}
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="print statistics, write nothing")
    args = parser.parse_args()
    made = rows()
    print(f"mixture_hh: {len(made)} pairs; families {dict(Counter(r['family'] for r in made))}")
    if args.check:
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(made), OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
