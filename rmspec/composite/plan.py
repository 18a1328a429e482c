"""`rmspec plan` of a composite spec: per component what it costs, from the spec and the files alone
(light: no model is loaded, no endpoint called). Each component's settings class says what it costs
(`plan_costs` in rmspec.spec.composite_models and composite_rules: a model's weight files, a judge's
requests, math-verify's workers; in process and no device memory by default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.spec.composite_spec import LoadedComposite


def component_costs(component: Any, base_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"name": component.name, "kind": component.kind, "weight": component.weight}
    out["normalize"] = component.normalize
    out.update(component.plan_costs(base_dir))
    return out


def composite_plan(loaded: LoadedComposite) -> dict[str, Any]:
    spec = loaded.spec
    c = spec.approach
    return {
        "name": spec.name,
        "approach": "composite",
        "run_dir": spec.output.dir.format(name=spec.name),
        "combine": c.combine,
        "gates": [{"component": g.component, "threshold": g.threshold, "floor": g.floor} for g in c.gates],
        "route_by": c.route_by,
        "on_failure": c.on_failure if isinstance(c.on_failure, str) else {"value": c.on_failure.value},
        "components": [component_costs(x, loaded.base_dir) for x in c.components],
        "fit_rows": spec.data.train,
        "validation_rows": spec.data.validation if spec.eval.validation else None,
        "benchmarks": [b.kind for b in spec.eval.benchmarks],
        "writes": ["reward.yaml", "results.json", "eval/validation.jsonl", "spec.yaml"],
    }


def render_composite_plan(plan: dict[str, Any]) -> list[str]:
    lines = [f"composite {plan['name']} -> {plan['run_dir']} ({plan['combine']}, on_failure {plan['on_failure']})"]
    for comp in plan["components"]:
        extra = ", ".join(f"{k} {v}" for k, v in comp.items() if k not in ("name", "kind"))
        lines.append(f"  {comp['name']} ({comp['kind']}): {extra}")
    for gate in plan["gates"]:
        lines.append(f"  gate: {gate['component']} >= {gate['threshold']:g}, else reward {gate['floor']:g}")
    if plan["route_by"]:
        lines.append(f"  routed by column {plan['route_by']}")
    lines.append(
        f"  fit on: {plan['fit_rows'] or 'nothing (no normalisation)'}; validate on: {plan['validation_rows']}"
    )
    if plan["benchmarks"]:
        lines.append(f"  benchmarks: {', '.join(plan['benchmarks'])}")
    lines.append(f"  writes: {', '.join(plan['writes'])}")
    return lines
