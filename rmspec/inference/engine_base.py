"""The inference engine a scorer kind calls to compute its head's outputs: torch in this process (the
default) or vLLM in a process rmspec starts and owns (rmspec.inference.engine_vllm).

An engine takes token ids that the scorer kind has already encoded and cut as training did
(rmspec.inference.encoding, the read point), and returns every head output per sequence in input
order. Encoding, normalisation, routes, limits and protocols stay with the scorer kind and the
server: they never know which engine runs. An engine that can no longer score says why
(`failure()`), and `outputs` then raises EngineDown, which the server answers with 503.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

# The engines other than torch, by name: "module:function(scorer, target, python, log) -> str", which starts
# one on the loaded scorer's model and attaches it (scorer.backend), returning the line that says so. Named by
# path, as an approach names its exporter: the starter lives with the export (it writes the model folder vLLM
# loads), above the packages that call it (the composite's model component); `rmspec serve --engine` calls it
# through rmspec.export.vllm_engine.EngineChoice.
STARTERS = {"vllm": "rmspec.export.vllm_engine:start"}


def start_engine(name: str, scorer: Any, target: str, python: str | None, log: Callable[[str], None] = print) -> str:
    """Start engine `name` for `scorer` (loaded from `target`); RmspecError (exit 2) where it cannot."""
    module, _, function = STARTERS[name].partition(":")
    return str(getattr(importlib.import_module(module), function)(scorer, target, python, log))


class EngineDown(Exception):
    """The engine can no longer score (its process exited): the reason, with the end of its log."""


class InferenceEngine(Protocol):
    name: str  # "torch" or "vllm": said at start and in /health
    # How many of the server's dynamic batches it takes side by side (rmspec.serve.batcher): 1 for torch (the
    # batches share this process's cores) and for vLLM's CPU engine (measured: bench/results/serve_engines.md).
    batches_at_once: int
    # How long the first request of a dynamic batch waits for others to join it (rmspec serve --max-wait-ms
    # overrides): a wait makes torch's forward passes fuller, and only adds latency where the engine batches
    # concurrent requests itself.
    batch_wait_ms: float

    def outputs(
        self,
        sequences: Sequence[Sequence[int]],
        type_ids: Sequence[Sequence[int] | None] | None = None,
        batch_size: int = 32,
    ) -> list[list[float]]:
        """Every head output per sequence, in input order; EngineDown once the engine is gone."""
        ...

    def token_outputs(self, sequences: Sequence[Sequence[int]]) -> list[list[list[float]]]:
        """Every head output at every token ([tokens][labels]): a process reward model's head."""
        ...

    def failure(self) -> str | None:
        """Why the engine can no longer score, or None while it can."""
        ...

    def close(self) -> None:
        """Stop what the engine started (nothing for torch)."""
        ...


class TorchEngine:
    """The model in this process: rmspec.inference.scoring.head_outputs (padded on the right,
    length-sorted batches, as training and `rmspec eval` do)."""

    name = "torch"
    batches_at_once = 1
    batch_wait_ms = 5.0

    def __init__(self, model: Any, pad_token_id: int):
        self.model, self.pad_token_id = model, pad_token_id

    def outputs(
        self,
        sequences: Sequence[Sequence[int]],
        type_ids: Sequence[Sequence[int] | None] | None = None,
        batch_size: int = 32,
    ) -> list[list[float]]:
        from rmspec.inference.scoring import head_outputs

        return head_outputs(self.model, sequences, self.pad_token_id, batch_size, type_ids=type_ids)

    def token_outputs(self, sequences: Sequence[Sequence[int]]) -> list[list[list[float]]]:
        from rmspec.inference.process import token_logits

        return token_logits(self.model, sequences, [None] * len(sequences), self.pad_token_id)

    def failure(self) -> str | None:
        return None

    def close(self) -> None:
        return None
