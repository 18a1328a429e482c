"""`rmspec plan` of a composite spec: per component what it costs, from the spec and the files alone
(light: no model is loaded, no endpoint called).

- model: device memory = its weight files on disk (the engine scores in float32 on CPU, the
  files' dtype on a GPU), one forward per row.
- judge: one request per row, up to max_tokens completion tokens, `concurrency` in flight; the
  bound on throughput is concurrency / timeout_s rows/s when every call runs to its limit.
- math_answer: one math-verify call per row in the pool; worst case workers / timeout_s rows/s.
- regex, json_schema, length, repetition: in-process, no device memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.spec.composite_spec import LoadedComposite

WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")
MATH_WORKERS = 2  # rmspec.composite.components.context.Context.math_workers


def _weights_gb(path: Path) -> float | None:
    folder = path / "model" if (path / "model" / "config.json").is_file() else path
    if not (folder / "config.json").is_file():
        return None
    files = [f for pattern in WEIGHT_FILES for f in folder.glob(pattern)]
    return round(sum(f.stat().st_size for f in files) / 1e9, 3) if files else None


def component_costs(component: Any, base_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"name": component.name, "kind": component.kind, "weight": component.weight}
    out["normalize"] = component.normalize
    if component.kind == "model":
        path = Path(component.path) if Path(component.path).is_absolute() else base_dir / component.path
        out.update(device_memory_gb=_weights_gb(path), forwards_per_row=1, where=str(path))
    elif component.kind == "judge":
        out.update(
            calls_per_row=1,
            completion_tokens_per_row=component.max_tokens,
            concurrency=component.concurrency,
            timeout_s=component.timeout_s,
            worst_rows_per_s=round(component.concurrency / component.timeout_s, 3),
            endpoint=component.base_url,
        )
    elif component.kind == "math_answer":
        out.update(
            processes=MATH_WORKERS,
            timeout_s=component.timeout_s,
            worst_rows_per_s=round(MATH_WORKERS / component.timeout_s, 3),
        )
    else:
        out.update(device_memory_gb=0.0, where="in process")
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
