"""One sweep as the driver and its outputs see it: the spec, the directory, the study and the lock that
serialises this process's calls into Optuna (trials run in threads; one storage client per process)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from rmspec.spec import LoadedSpec
from rmspec.spec.sweep import SweepSpec
from rmspec.sweep.layout import SweepDir
from rmspec.sweep.live import SweepView


@dataclass
class Sweep:
    loaded: LoadedSpec
    sets: tuple[str, ...]
    dir: SweepDir
    study: Any  # optuna.Study (Optuna is imported by the sweep's driver modules alone)
    view: SweepView
    storage: str = "sqlite"  # sweep.storage as the sweep started (sqlite, journal or a URL)
    joined: bool = False  # started with --join: other workers may share the study
    guard: threading.RLock = field(default_factory=threading.RLock)

    @property
    def spec(self) -> SweepSpec:
        sweep = self.loaded.spec.sweep
        assert sweep is not None  # checked when the sweep opened
        return sweep

    @property
    def seeds(self) -> list[int | None]:
        return list(self.spec.seeds) if self.spec.seeds else [None]
