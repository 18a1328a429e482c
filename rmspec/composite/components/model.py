"""`model`: a trained reward model (an rmspec run or a sequence-classification model folder),
scored by the engine behind `rmspec score`: (prompt, response) laid out as training laid it out;
the whole query text when an RL trainer sent one (as `rmspec serve` scores /get_reward)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome, failed, ok
from rmspec.errors import RmspecError
from rmspec.spec.composite import ModelComponent


class Model:
    needs_reference = False

    def __init__(self, engine: Any):
        if str(engine.kind) != "reward":
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
            engine.encode_text(it.query) if it.query is not None else engine.encode([(it.prompt, it.response)])[0]
            for it in items
        ]
        return [
            ok(v[0]) if _finite(v[0]) else failed("invalid_output", "non-finite reward")
            for v in engine.outputs(encoded)
        ]


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
    return Model(context.load_model(str(path)))
