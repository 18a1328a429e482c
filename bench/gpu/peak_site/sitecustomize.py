"""bench/gpu only (on PYTHONPATH for the measured runs): each rmspec training process writes its memory
peaks at exit into RMSPEC_BENCH_PEAK/rank{R}.json: torch.cuda.max_memory_allocated and
max_memory_reserved on a GPU, the process's peak RSS always."""

import os
import sys

if "rmspec.launch.entrypoint" in sys.orig_argv and os.environ.get("RMSPEC_BENCH_PEAK"):
    import atexit

    def _write_peak() -> None:
        import json
        import resource

        import torch

        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        facts = {
            "cuda_allocated_peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
            "cuda_reserved_peak_bytes": torch.cuda.max_memory_reserved() if cuda else None,
            "rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }
        rank = os.environ.get("RANK", "0")
        folder = os.environ["RMSPEC_BENCH_PEAK"]
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"rank{rank}.json"), "w") as out:
            json.dump(facts, out)

    atexit.register(_write_peak)
