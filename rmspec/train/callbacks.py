"""Trainer callbacks: metrics.jsonl in the field's names, peak memory per interval, Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

# Trainer key -> metrics.jsonl key (the open-instruct names).
PAIR_KEYS = ("loss", "accuracy", "chosen_rewards", "rejected_rewards", "reward_margin")


def rename(logs: dict[str, float], family: str) -> dict[str, float]:
    """{'loss': .., 'eval_accuracy': ..} -> {'train/rm/loss': .., 'eval/rm/accuracy': ..}."""
    out: dict[str, float] = {}
    for key, value in logs.items():
        if key == "learning_rate":
            out[f"train/{family}/lr"] = value
        elif key in ("grad_norm", "epoch", "num_tokens", "model_step"):
            out[key] = value
        elif key.startswith("eval_"):
            name = key[len("eval_") :]
            if name in ("runtime", "samples_per_second", "steps_per_second"):
                out[f"eval/{name}"] = value
            else:
                out[f"eval/{family}/{name}"] = value
        elif key.startswith("train_"):  # the end-of-training summary
            out[f"train/{key[len('train_') :]}"] = value
        elif key in ("total_flos",):
            out[key] = value
        else:
            out[f"train/{family}/{key}"] = value
    return out


def metric_family(approach_kind: str) -> str:
    """metrics.jsonl's prefix for the approach's metrics (eval/<family>/...): its declaration says."""
    from rmspec import approaches

    return approaches.get(approach_kind).metric_family


class PeakMemory:
    """Peak memory of the current interval: CUDA's allocator peak, or sampled RSS on CPU."""

    def __init__(self, interval_s: float = 0.05):
        self.cuda = torch.cuda.is_available()
        self._peak = 0
        self._stop = threading.Event()
        self._thread = None
        if not self.cuda:
            import psutil

            self._proc = psutil.Process()
            self._thread = threading.Thread(target=self._sample, args=(interval_s,), daemon=True)
            self._thread.start()

    def _sample(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self._peak = max(self._peak, self._proc.memory_info().rss)

    def take_gb(self) -> float:
        """The peak since the last call, in GiB; starts a new interval."""
        if self.cuda:
            peak = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        else:
            peak = max(self._peak, self._proc.memory_info().rss)
            self._peak = 0
        return peak / 2**30

    def close(self) -> None:
        self._stop.set()


class MetricsJsonl(TrainerCallback):
    """Appends one JSON object per log to metrics.jsonl (main process only), flushed at once so
    the parent's live view follows the run."""

    def __init__(self, path: Path, family: str = "rm", trackers: list | None = None, context_parallel: int = 1):
        self.path = Path(path)
        self.context_parallel = context_parallel  # the processes of a group share their rows: count them once
        self.family = family
        self.trackers = trackers or []  # rmspec.train.trackers: each gets every row, as written
        self.memory: PeakMemory | None = None
        self.last_time: float | None = None
        self.last_step = 0

    def _replicas(self, args) -> int:
        """Processes that each train their own examples (all of them, or the context-parallel groups)."""
        return max(max(args.world_size, 1) // self.context_parallel, 1)

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.memory = PeakMemory()
            self.last_time = time.time()
            self.last_step = state.global_step
            self._write(
                {"event": "train_begin", "step": state.global_step, "max_steps": state.max_steps, "time": time.time()}
            )

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row = {"step": state.global_step, "max_steps": state.max_steps, **rename(logs, self.family)}
        if f"train/{self.family}/loss" in row:
            # open-instruct's episode: training examples (pairs) seen so far, all processes
            row["episode"] = (
                state.global_step
                * args.per_device_train_batch_size
                * args.gradient_accumulation_steps
                * self._replicas(args)
            )
        now = time.time()
        if self.memory is not None and not any(k.startswith("eval/") for k in row):
            row["peak_memory_gb"] = round(self.memory.take_gb(), 4)
        if self.last_time is not None and f"train/{self.family}/loss" in row and state.global_step > self.last_step:
            steps = state.global_step - self.last_step
            row["seconds_per_step"] = (now - self.last_time) / steps
            row["samples_per_second"] = (
                steps
                * args.per_device_train_batch_size
                * args.gradient_accumulation_steps
                * self._replicas(args)
                / (now - self.last_time)
            )
            self.last_time, self.last_step = now, state.global_step
        row["time"] = now
        self._write(row)
        if self.trackers:
            from rmspec.train.trackers import numeric

            for tracker in self.trackers:
                tracker.log(numeric(row), row["step"])

    def on_train_end(self, args, state, control, **kwargs):
        if self.memory is not None:
            self.memory.close()

    def close_trackers(self) -> None:
        for tracker in self.trackers:
            tracker.close()
        self.trackers = []

    def _write(self, row: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, default=float) + "\n")
            handle.flush()


class GracefulInterrupt(TrainerCallback):
    """First SIGINT/SIGTERM: save a checkpoint at the end of the current step and stop.
    A second SIGINT (Ctrl-C again) interrupts at once. SIGTERM never escalates: under SLURM
    (scancel, requeue, preemption) each worker gets it twice, from slurmstepd and again from the
    torch elastic agent it kills, and whoever sends SIGTERM follows with SIGKILL anyway (measured
    on a real 2-node job: the second SIGTERM killed rank 1 mid-step and rank 0 failed on gloo)."""

    def __init__(self):
        self.requested = False
        self._previous = {}

    def install(self) -> GracefulInterrupt:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread (tests)
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True

    def on_step_end(self, args, state, control, **kwargs):
        if args.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            # Every rank must stop at the same step, or the others wait forever in the next all-reduce.
            flag = torch.tensor([1.0 if self.requested else 0.0], device=args.device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            self.requested = bool(flag.item())
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
        return control
