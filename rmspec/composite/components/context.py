"""What components share at build time: where relative paths start, and the heavy resources a
component asks for lazily (the math-verify pool, reward models), so a composite with no such
component never starts or loads them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Context:
    base_dir: Path = field(default_factory=Path.cwd)
    math_workers: int = 2
    # MODEL_OR_RUN -> a loaded scorer (rmspec.inference.engine.load_scorer), given by the loader so
    # this package never reaches up for it.
    load_model: Callable[[str], Any] | None = None
    _math_pool: Any = None
    # what components started and must stop with the composite (a model component's vLLM engine)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)

    def math_pool(self, limit_s: float) -> Any:
        if self._math_pool is None:
            from rmspec.composite.mathpool import MathPool

            self._math_pool = MathPool(self.math_workers, limit_s)
        return self._math_pool

    def on_close(self, stop: Callable[[], None]) -> None:
        self._closers.append(stop)

    def close(self) -> None:
        while self._closers:
            self._closers.pop()()
        if self._math_pool is not None:
            self._math_pool.close()
            self._math_pool = None
