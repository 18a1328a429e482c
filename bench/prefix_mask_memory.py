"""The prompt-once mask handed to the model: one float mask made once (rmspec.inference.prefix_mask.additive_mask,
what rmspec does) against the bool mask rmspec handed SDPA before, which SDPA converts to a float mask in every
layer and keeps for backward. Peak memory rise of one forward and backward of a prompt-once pair, each variant
in a fresh process, on bench/context_parallel.py's tiny decoder (4 layers, hidden 256, fp32, SDPA).

    OMP_NUM_THREADS=1 python bench/prefix_mask_memory.py --lengths 4096 8192 [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "prefix_mask_memory.md"


def child(length: int, variant: str) -> None:
    sys.path.insert(0, str(HERE))
    import context_parallel_acceptance as bench

    import rmspec.inference.prefix_mask as prefix_mask

    if variant == "bool":  # the mask as rmspec handed it to SDPA before: SDPA converts it in every layer
        prefix_mask.additive_mask = lambda ok, dtype: ok
    print(json.dumps(bench.two_sequences(length, 256, 1, packed=True)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("LENGTH", "VARIANT"))
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1])
        return
    load = os.getloadavg()[0]
    rows = []
    for length in args.lengths:
        peaks = {}
        for variant in ("bool", "float"):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(length), variant], capture_output=True, text=True, check=True
            )
            peaks[variant] = json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]
            print(length, variant, peaks[variant], flush=True)
        rows.append(
            f"| {length:,} | {peaks['bool']:.0f} | {peaks['float']:.0f} | {peaks['float'] / peaks['bool']:.2f} |"
        )
    text = "\n".join(
        [
            "# The prompt-once mask: one float mask for every layer against a bool mask SDPA converts per layer",
            "",
            f"Command: `OMP_NUM_THREADS=1 python bench/prefix_mask_memory.py --lengths {' '.join(map(str, args.lengths))} "
            "--write`",
            "",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with a test run (load {load:.1f} before, "
            f"{os.getloadavg()[0]:.1f} after; memory is not timing). torch one thread; the model: bench/context_parallel.py's "
            "tiny decoder (4 layers, hidden 256, 8 heads, fp32, SDPA); one prompt-once pair (two 256-token replies), "
            "forward and backward of the Bradley-Terry loss. Peak: the rise of the process's peak resident set over "
            "its resident set before the step, each variant in a fresh process.",
            "",
            "| tokens | bool mask (MiB) | one float mask (MiB) | float / bool |",
            "|---:|---:|---:|---:|",
            *rows,
            "",
            "Given a bool mask, SDPA makes a float mask of the same shape in every layer and saves it for the backward "
            "pass (4 bytes per element per layer in fp32). rmspec now makes the float mask once per batch and every "
            "layer reads that tensor; on a model with more layers the bool variant's copies grow with the layer count.",
            "",
        ]
    )
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
