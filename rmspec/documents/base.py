"""What a document kind declares: the one type every module under rmspec/documents/ instantiates.

A spec file is one of a few kinds of document: the training spec (rmspec.spec.Spec: a model trained,
planned and launched) or a document that trains nothing (a composite reward). The CLI asks the
registry (rmspec.documents) once per command which kind a file or a run directory is, then calls the
kind: `rmspec validate` its `load` and `summary`, `plan` its planner, `run` its runner, `eval` its
evaluator, `export` its exporter, `init` its template, `schema` its model.

Light (no torch): the heavy parts are named by dotted path, "module:function", and imported only
when a command calls them (`DocumentKind.hook`), as approaches name theirs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmspec.spec.scorer_kind import ScorerKind


class DocumentKind:
    """One kind of spec document. A module under rmspec/documents/ subclasses this and sets `KIND = Its()`."""

    name: str  # the registry's name; for a document that trains nothing, also its approach.kind
    description: str = ""
    document: type[Any]  # the pydantic model of the whole document (its JSON Schema, `init`'s comments)
    trains: bool = True  # a model is trained: the planner, the launcher and the trainer take it from here
    run_file: str = "spec.yaml"  # the file of its run directory that names its kind (`rmspec export`, `eval`)

    # ---- what trains nothing also declares (None on the training spec, whose plan, run and
    # evaluation go through rmspec.plan, rmspec.launch and rmspec.evaluate)
    # "module:function(loaded) -> dict": what `rmspec plan` prints (--json)
    planner: str | None = None
    plan_view: str | None = None  # "module:function(plan dict) -> list[str]": the plan's lines
    runner: str | None = None  # "module:function(loaded, *, overwrite, progress) -> run dir": `rmspec run`
    # "module:function(run, requests | None, *, limit, batch_size, progress) -> results": `rmspec eval RUN`
    evaluator: str | None = None
    scorer: ScorerKind | None = None  # how its run scores (None: the trained approach's scorer)
    validation_metrics: tuple[str, ...] = ()  # results.json validation.metrics of its run
    # `rmspec export RUN`: "module:function(run or spec, target, out) -> path" (None: the approach's)
    exporter: str | None = None
    export_targets: tuple[str, ...] = ()
    export_writes: str = "file"
    template: str = ""  # `rmspec init --approach NAME`: file under rmspec/templates/ ("" : the approach's)

    def claims(self, doc: dict[str, Any]) -> bool:
        """This parsed document is of this kind (a document that trains nothing: its approach.kind)."""
        section = doc.get("approach")
        return isinstance(section, dict) and section.get("kind") == self.name

    def load(self, path: str | Path, sets: Any = ()) -> Any:
        """The file read and checked (located errors, SpecError): its loaded document."""
        raise NotImplementedError

    def check(self, doc: dict[str, Any], locations: Any, file: str | Path) -> Any:
        """An already parsed document checked (what `init` writes must validate as written)."""
        raise NotImplementedError

    def summary(self, loaded: Any) -> str:
        """What `rmspec validate` says after "valid (" for a loaded document."""
        raise NotImplementedError

    def hook(self, which: str) -> Callable[..., Any]:
        """The heavy function a dotted "module:function" attribute names, imported now."""
        value = getattr(self, which)
        if value is None:
            raise NotImplementedError(f"document kind {self.name} has no {which}")
        module, _, function = value.partition(":")
        return getattr(importlib.import_module(module), function)
