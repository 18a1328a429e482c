"""Writes the shipped math demo set behind the composite reward's docs, tests and benchmark
(rmspec/data/demo/math_*.jsonl). Deterministic (seed 0); rerun to regenerate.

Problems are arithmetic with exact answers (sums, products, differences, fractions). Each has
candidate responses that differ in correctness and format: right or wrong answer, inside
<think>..</think><answer>..</answer> or not, the answer as an integer, a fraction or a decimal.

- math_answers_train.jsonl / math_answers_val.jsonl: prompt, response, label (the reference).
- math_pairs.jsonl: prompt, chosen (right and formatted), rejected (wrong or unformatted): to
  train a Bradley-Terry model for the best-of-N comparison.
- math_bestofn.jsonl: prompt, label, responses (4), good (per response: right AND formatted).
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "rmspec" / "data" / "demo"


def problem(rng: random.Random) -> tuple[str, Fraction]:
    a, b = rng.randint(2, 60), rng.randint(2, 60)
    kind = rng.choice(["sum", "product", "difference", "fraction"])
    if kind == "sum":
        return f"What is {a} + {b}?", Fraction(a + b)
    if kind == "product":
        return f"What is {a} * {b}?", Fraction(a * b)
    if kind == "difference":
        return f"What is {a} - {b}?", Fraction(a - b)
    d = rng.choice([2, 4, 5, 8, 10])
    return f"What is {a} divided by {d}, as a fraction in lowest terms?", Fraction(a, d)


def latex(x: Fraction, rng: random.Random) -> str:
    if x.denominator == 1:
        return str(x.numerator)
    if rng.random() < 0.5:
        return f"\\frac{{{x.numerator}}}{{{x.denominator}}}"
    return str(float(x))  # a terminating decimal: denominators are 2, 4, 5, 8, 10


def response(question: str, answer: Fraction, right: bool, formatted: bool, rng: random.Random) -> str:
    value = answer if right else answer + rng.choice([-3, -2, -1, 1, 2, 5, Fraction(1, 2)])
    shown = latex(value, rng)
    thought = rng.choice(
        ["Let me work it out step by step.", "I compute the value carefully.", "Quick arithmetic.", "Think first."]
    )
    if rng.random() < 0.25:
        thought += " " + " ".join([rng.choice(["so", "then", "well"])] * rng.randint(3, 8))
    if formatted:
        return f"<think>{thought}</think>\n<answer>$\\boxed{{{shown}}}$</answer>"
    return rng.choice([f"{thought} The answer is ${shown}$.", f"$\\boxed{{{shown}}}$", f"Answer: {shown}"])


def reference(answer: Fraction) -> str:
    return str(answer.numerator) if answer.denominator == 1 else f"\\frac{{{answer.numerator}}}{{{answer.denominator}}}"


def main() -> None:
    rng = random.Random(0)
    rows = {
        "math_answers_train.jsonl": [],
        "math_answers_val.jsonl": [],
        "math_pairs.jsonl": [],
        "math_bestofn.jsonl": [],
    }
    for i in range(480):
        question, answer = problem(rng)
        ref = reference(answer)
        if i < 160:  # pairs for the trained model
            bad = rng.choice([(False, True), (True, False), (False, False)])
            rows["math_pairs.jsonl"].append(
                {
                    "prompt": question,
                    "chosen": response(question, answer, True, True, rng),
                    "rejected": response(question, answer, *bad, rng),
                }
            )
        elif i < 280:  # single responses: fit (60) and validation (60)
            right, formatted = rng.random() < 0.5, rng.random() < 0.7
            target = "math_answers_train.jsonl" if i < 220 else "math_answers_val.jsonl"
            rows[target].append(
                {"prompt": question, "response": response(question, answer, right, formatted, rng), "label": ref}
            )
        else:  # best-of-4: at least one good candidate, the others a mix
            kinds = [(True, True)] + [rng.choice([(True, False), (False, True), (False, False)]) for _ in range(3)]
            rng.shuffle(kinds)
            rows["math_bestofn.jsonl"].append(
                {
                    "prompt": question,
                    "label": ref,
                    "responses": [response(question, answer, r, f, rng) for r, f in kinds],
                    "good": [r and f for r, f in kinds],
                }
            )
    for name, content in rows.items():
        (OUT / name).write_text("".join(json.dumps(r) + "\n" for r in content))
        print(f"{OUT / name}: {len(content)} rows")


if __name__ == "__main__":
    main()
