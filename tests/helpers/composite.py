"""Composite runs for the composite tests: RUN/reward.yaml written as `rmspec run` writes it, and
rows of math answers with references."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FORMAT = r"<think>.*?</think>\s*<answer>.*?</answer>"
# (question, response, reference): right, wrong, unformatted, unparseable, no reference, repeated
MATH_ROWS: list[tuple[str, str, Any]] = [
    ("What is 1 + 1?", "<think>add one and one</think><answer>$\\boxed{2}$</answer>", "2"),
    ("What is 3 / 4 as a decimal?", "<think>divide</think> <answer>$\\boxed{0.75}$</answer>", "$\\frac{3}{4}$"),
    ("What is 2 * 5?", "<think>times</think><answer>$\\boxed{12}$</answer>", "10"),
    ("What is 1 + 1?", "The answer is $\\boxed{2}$", "2"),
    ("Name a prime.", "<think>hmm</think><answer>no idea</answer>", "7"),
    ("What is 6 - 1?", "<think>subtract</think><answer>$5$</answer>", None),
    ("What is 2 + 2?", "<think>a a a a a a a a</think><answer>$\\boxed{4}$</answer>", "4"),
]


def composite_section(model_dir: Path | None = None, *, math_timeout: float = 5.0, on_failure: Any = None) -> dict:
    components: list[dict[str, Any]] = [
        {"name": "fmt", "kind": "regex", "pattern": FORMAT, "weight": 0.0},
        {"name": "math", "kind": "math_answer", "weight": 1.0, "timeout_s": math_timeout},
        {"name": "rep", "kind": "repetition", "ngram": 2, "weight": 0.5},
    ]
    if model_dir is not None:
        components.append({"name": "rm", "kind": "model", "path": str(model_dir), "weight": 0.25})
    return {
        "kind": "composite",
        "components": components,
        "gates": [{"component": "fmt", "floor": -1.0}],
        "on_failure": on_failure if on_failure is not None else {"value": 0.0},
    }


def write_composite_run(run: Path, section: dict, stats: dict | None = None) -> Path:
    from rmspec.composite.reward_file import write_reward_file
    from rmspec.spec.composite import Composite

    run.mkdir(parents=True, exist_ok=True)
    write_reward_file(run, Composite.model_validate(section), stats or {}, run)
    return run


def write_math_rows(path: Path, rows=MATH_ROWS) -> Path:
    path.write_text(
        "".join(
            json.dumps({"prompt": [{"role": "user", "content": q}], "response": r, "label": ref}) + "\n"
            for q, r, ref in rows
        )
    )
    return path
