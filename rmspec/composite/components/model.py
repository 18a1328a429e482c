"""`model`: a trained reward model (an rmspec run or a sequence-classification model folder),
scored by the engine behind `rmspec score` (torch, or with `engine: vllm` a vLLM server started and attached
as `rmspec serve --engine vllm` does, stopped with the composite): (prompt, response) laid out as training laid it out.
When an RL trainer sent a query (`rmspec serve`'s /get_reward), a chat-template model reads the
query whole (the templated conversation, as `rmspec serve` of that model does); a pair (encoder) or
plain model scores the (prompt, response) cut from it, so serve and score give the same reward."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome, failed, ok
from rmspec.data.layout import TEMPLATE
from rmspec.errors import RmspecError
from rmspec.spec.composite_models import ModelComponent


class Model:
    needs_reference = False

    def __init__(self, engine: Any):
        from rmspec.inference import scorers

        if not scorers.of(engine).text_reward:
            raise RmspecError(
                f"a composite's model component needs a reward model with one score; this one is {engine.kind}",
                "point `path` at a Bradley-Terry or single-output reward model",
            )
        self.engine = engine
        self.lock = threading.Lock()

    def score(self, items: Sequence[Item]) -> list[Outcome]:
        with self.lock:  # one forward at a time: the server calls from several threads
            return self._score(items)

    def _score(self, items: Sequence[Item]) -> list[Outcome]:
        engine = self.engine
        encoded = [
            engine.encode_text(it.query) if self._reads_query(it) else engine.encode([(it.prompt, it.response)])[0]
            for it in items
        ]
        return [
            ok(v[0]) if _finite(v[0]) else failed("invalid_output", "non-finite reward")
            for v in engine.outputs(encoded)
        ]

    def _reads_query(self, item: Item) -> bool:
        """A chat-template model reads an RL trainer's query whole: it is the templated conversation,
        read where training reads it. A pair (encoder) or plain layout has no template in the query to
        read: it scores (prompt, response) as training and `rmspec score` lay them out (the query had
        no separator and no segment ids: its rewards drifted by ~7e-3)."""
        return item.query is not None and getattr(getattr(self.engine, "layout", None), "kind", None) == TEMPLATE


def _finite(value: float) -> bool:
    return value == value and abs(value) != float("inf")


def build(settings: ModelComponent, context: Context) -> Model:
    if context.load_model is None:
        raise RmspecError(
            "this composite has a model component but nothing to load models with", "load it with load_composite"
        )
    path = context.resolve(settings.path)
    if not path.exists():
        raise RmspecError(
            f"component {settings.name}: {path}: no such run directory or model folder",
            "give an rmspec run directory or a folder with config.json and weights",
        )
    model = Model(placed(context.load_model(str(path)), settings))
    if settings.engine == "vllm":
        on_engine(model.engine, str(path), settings, context)
    return model


def on_engine(engine: Any, target: str, settings: ModelComponent, context: Context) -> None:
    """engine: vllm: a vLLM server started on the model and attached to its scorer by the code `rmspec serve
    --engine vllm` runs (rmspec.inference.engine_base.start_engine); stopped with the composite."""
    from rmspec.inference.engine_base import start_engine

    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    try:
        line = start_engine("vllm", engine, target, settings.vllm_python, say)
    except RmspecError as exc:
        raise RmspecError(
            f"component {settings.name} (engine: vllm): {exc.message}",
            f"set engine: torch (the default) for it, or: {exc.hint}",
        ) from None
    context.on_close(engine.backend.close)
    say(f"component {settings.name}: engine {line}")


def placed(engine: Any, settings: ModelComponent) -> Any:
    """The loaded engine on the component's device, in its dtype, with its batch size (unset: as
    loaded: cpu, float32, the command's batch size)."""
    if settings.batch_size is not None:
        engine.batch_size = settings.batch_size
    if settings.device is None and settings.dtype is None:
        return engine
    import torch

    device = settings.device
    if device is not None and device.startswith("cuda") and not torch.cuda.is_available():
        raise RmspecError(
            f"component {settings.name}: device {device}, but torch sees no CUDA device here",
            "remove device (cpu), or run on a host with a GPU and a CUDA build of torch",
        )
    if device is not None and device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise RmspecError(
            f"component {settings.name}: device {device}, but torch sees {torch.cuda.device_count()} CUDA device(s)",
            "name one of them: cuda:0 ..",
        )
    if device == "mps" and not torch.backends.mps.is_available():
        raise RmspecError(f"component {settings.name}: device mps is not available here", "remove device (cpu)")
    engine.model.to(device=device, dtype=getattr(torch, settings.dtype) if settings.dtype else None)
    return engine
