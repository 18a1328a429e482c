"""Best-of-N selection on the shipped math demo set (rmspec/data/demo/math_bestofn.jsonl: 200
problems x 4 responses, exactly one right AND formatted): a trained Bradley-Terry model alone, the
rule alone (math_answer gated on the <think>/<answer> format) and the composite (the rule plus the
model, weight 0.1), by selection accuracy over seeds; and rows/s of each component (math-verify in
the process pool vs called inline in the main thread).

The model: all-MiniLM-L6-v2 trained with `rmspec run` on math_pairs.jsonl (160 pairs: chosen right
and formatted, rejected wrong or unformatted), one run per seed. Ties in a selection are broken at
random (seeded). Writes bench/results/composite_bestofn.{jsonl,md}.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/composite_bestofn.py [--seeds 0 1 2] [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "rmspec" / "data" / "demo"
OUT = REPO / "bench" / "results"
FORMAT = r"<think>.*?</think>\s*<answer>.*?</answer>"
TRAIN_SPEC = """\
version: 1
name: math-bt-{seed}
model: {{name_or_path: sentence-transformers/all-MiniLM-L6-v2, dtype: auto}}
data:
  source: {{kind: files, paths: [{demo}/math_pairs.jsonl]}}
  mapping: {{preset: pairs}}
  split: {{validation_fraction: 0.1, seed: 0}}
approach: {{kind: bradley_terry}}
training: {{epochs: {epochs}, learning_rate: 1.0e-4, global_batch_size: 16, max_length: 128, seed: {seed}, logging_steps: 5}}
hardware: {{device: cpu, gpus_per_node: 1}}
eval: {{validation: true}}
output: {{dir: {out}}}
"""


def train(seed: int, epochs: int, work: Path) -> Path:
    run = work / f"bt-{seed}"
    if (run / "model" / "config.json").is_file():
        return run
    spec = work / f"bt-{seed}.yaml"
    spec.write_text(TRAIN_SPEC.format(seed=seed, demo=DEMO, epochs=epochs, out=run))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "run", str(spec)], env=env, cwd=REPO, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"training seed {seed} failed:\n{done.stderr[-3000:]}")
    return run


def scorer(components: list[dict], gates: list[dict], load_model=None):
    from rmspec.composite.components.context import Context
    from rmspec.composite.scorer import CompositeScorer
    from rmspec.spec.composite import Composite

    section = {"kind": "composite", "components": components, "gates": gates, "on_failure": {"value": 0.0}}
    return CompositeScorer(Composite.model_validate(section), Context(load_model=load_model))


def rewards(composite, problems) -> list[list[float]]:
    from rmspec.composite.outcome import Item

    items = [Item(p["prompt"], r, p["label"]) for p in problems for r in p["responses"]]
    flat = [row.reward for row in composite.score_items(items)]
    return [flat[4 * i : 4 * i + 4] for i in range(len(problems))]


def accuracy(scores: list[list[float]], problems, rng: random.Random) -> float:
    right = 0
    for s, p in zip(scores, problems):
        best = max(s)
        pick = rng.choice([i for i, v in enumerate(s) if v == best])
        right += p["good"][pick]
    return right / len(problems)


def timed(fn, repeats: int = 3) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    mean = statistics.fmean(times)
    return mean, (statistics.stdev(times) / len(times) ** 0.5 if len(times) > 1 else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rmspec-bench-composite"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    from rmspec.inference.engine import load_scorer

    problems = [json.loads(x) for x in (DEMO / "math_bestofn.jsonl").read_text().splitlines()]
    rule = [
        {"name": "fmt", "kind": "regex", "pattern": FORMAT, "weight": 0.0},
        {"name": "math", "kind": "math_answer", "weight": 1.0},
    ]
    gate = [{"component": "fmt", "floor": -1.0}]
    records = []
    rule_scorer = scorer(rule, gate)
    rule_scores = rewards(rule_scorer, problems)
    failures = rule_scorer.counts.to_json()["components"]
    rule_scorer.close()
    for seed in args.seeds:
        run = train(seed, args.epochs, args.work)
        model_only = scorer([{"name": "rm", "kind": "model", "path": str(run)}], [], load_model=load_scorer)
        both = scorer(rule + [{"name": "rm", "kind": "model", "path": str(run), "weight": 0.1}], gate, load_scorer)
        for name, scores in (
            ("model", rewards(model_only, problems)),
            ("rule", rule_scores),
            ("composite", rewards(both, problems)),
        ):
            records.append(
                {"seed": seed, "selector": name, "accuracy": accuracy(scores, problems, random.Random(seed))}
            )
            print(records[-1], flush=True)
        both.close()
    speed = component_speed(problems, args.work / f"bt-{args.seeds[0]}", load_scorer)
    write(records, speed, failures, args)


def component_speed(problems, run: Path, load_scorer) -> dict[str, tuple[float, float, int]]:
    """rows/s (mean, standard error over 3 repeats, rows) of each component on the 800 responses."""
    from rmspec.composite.components import build
    from rmspec.composite.components.context import Context
    from rmspec.composite.mathpool import check_inline
    from rmspec.composite.outcome import Item
    from rmspec.packaged import resolve_model_path
    from rmspec.spec.composite_models import ModelComponent
    from rmspec.spec.composite_rules import LengthRule, MathAnswer, RegexRule, RepetitionRule

    items = [Item(p["prompt"], r, p["label"]) for p in problems for r in p["responses"]]
    n = len(items)
    context = Context(load_model=load_scorer)
    tokenizer = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    parts = {
        "regex": build(RegexRule(kind="regex", name="fmt", pattern=FORMAT), context),
        "repetition": build(RepetitionRule(kind="repetition", name="rep"), context),
        "length (MiniLM tokenizer)": build(
            LengthRule(kind="length", name="len", tokenizer=tokenizer, max_tokens=64, cache_tokens=16), context
        ),
        "model (MiniLM, CPU)": build(ModelComponent(kind="model", name="rm", path=str(run)), context),
        "math_answer, pool of 2 processes": build(MathAnswer(kind="math_answer", name="math"), context),
    }
    parts["math_answer, pool of 2 processes"].score(items[:4])  # start the workers outside the timing
    out = {}
    for name, part in parts.items():
        mean, se = timed(lambda part=part: part.score(items))
        out[name] = (n / mean, n * se / mean**2, n)
    mean, se = timed(lambda: [check_inline(it.reference, it.response) for it in items])
    out["math_answer, inline (main thread)"] = (n / mean, n * se / mean**2, n)
    context.close()
    return out


def write(records, speed, failures, args) -> None:
    OUT.mkdir(exist_ok=True)
    (OUT / "composite_bestofn.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lines = [
        "# Best-of-N selection: a trained model alone vs the rule alone vs the composite",
        "",
        f"`HF_HUB_OFFLINE=1 .venv/bin/python bench/composite_bestofn.py --seeds {' '.join(map(str, args.seeds))} --epochs {args.epochs}`",
        "",
        "Machine: 2 shared CPU cores (contended by other jobs), no GPU. Data: rmspec/data/demo/math_bestofn.jsonl "
        "(200 arithmetic problems x 4 responses; exactly one per problem is right AND in the "
        "<think>/<answer> format: the target). Model: all-MiniLM-L6-v2 trained by `rmspec run` on "
        "math_pairs.jsonl (160 pairs) per seed. Rule: math_answer (math-verify) gated on the format regex "
        "(floor -1). Composite: the rule + 0.1 x the model's reward. Ties broken at random (seeded).",
        "",
        "| selector | accuracy (mean ± s.e. over seeds) | per seed |",
        "|---|---|---|",
    ]
    for name in ("model", "rule", "composite"):
        accs = [r["accuracy"] for r in records if r["selector"] == name]
        se = statistics.stdev(accs) / len(accs) ** 0.5 if len(accs) > 1 else 0.0
        lines.append(f"| {name} | {statistics.fmean(accs):.3f} ± {se:.3f} | {', '.join(f'{a:.3f}' for a in accs)} |")
    lines += [
        "",
        f"Rule failures over the 800 responses (counted, each scored by on_failure value 0): `{json.dumps(failures)}`",
        "",
    ]
    lines += ["| component | rows/s (mean ± s.e., 3 repeats) | rows |", "|---|---|---|"]
    for name, (rate, se, n) in speed.items():
        lines.append(f"| {name} | {rate:,.0f} ± {se:,.0f} | {n} |")
    (OUT / "composite_bestofn.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
