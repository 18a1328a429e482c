"""Failure counts per component and reason, kept across calls (a server's lifetime, a file's rows)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from rmspec.spec.composite_component import FAILURE_REASONS


class FailureCounts:
    def __init__(self, components: Iterable[str]):
        self.components = list(components)
        self._lock = threading.Lock()
        self.rows = 0
        self.rows_failed = 0  # rows whose reward could not be given (on_failure: error)
        self.scored = dict.fromkeys(self.components, 0)  # rows each component was asked about
        self.failed = {name: dict.fromkeys(FAILURE_REASONS, 0) for name in self.components}

    def add(self, used: dict[str, str | None], row_failed: bool) -> None:
        """One row: the components used on it, each with its failure reason or None."""
        with self._lock:
            self.rows += 1
            self.rows_failed += int(row_failed)
            for name, reason in used.items():
                self.scored[name] += 1
                if reason is not None:
                    self.failed[name][reason] += 1

    def to_json(self) -> dict[str, object]:
        with self._lock:
            return {
                "rows": self.rows,
                "rows_failed": self.rows_failed,
                "components": {
                    name: {"scored": self.scored[name], "failed": {r: n for r, n in self.failed[name].items() if n}}
                    for name in self.components
                },
            }
