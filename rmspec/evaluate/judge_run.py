"""A generative judge's end-of-run evaluation (approach kind generative's `evaluation` hook): each
held-out pair and each pairwise benchmark judged in both orders (rmspec.inference.judge).

The validation split's rows are conversations in the judge prompt's layout
(rmspec.inference.judge.judge_message); each is read back into (prompt, response A, response B,
the labelled verdict) and judged as written and with the responses swapped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from rmspec.evaluate import results as res
from rmspec.evaluate.benchmark_runs import say
from rmspec.evaluate.validation import prepare_validation
from rmspec.rundir import RunDir
from rmspec.spec.benchmarks import JUDGE

# judge_message's layout: the instruction, then the prompt and the two responses under their headers.
LAYOUT = re.compile(r"\n\n\[Prompt\]\n(.*)\n\n\[Response A\]\n(.*)\n\n\[Response B\]\n(.*)\Z", re.S)


def validation_pairs(rows: Sequence[dict[str, Any]], pattern: str) -> tuple[Any, int]:
    """(pairs benchmark data of the held-out conversations in the judge layout, rows not in it)."""
    from rmspec.evaluate.loading import BenchmarkData, Example
    from rmspec.inference.judge import judge_prompt_text, parse_verdict

    examples, skipped = [], 0
    for i, row in enumerate(rows):
        if "chosen" in row:  # a judge trained by GRPO holds out preference pairs (the chosen response wins)
            if row.get("tie"):
                skipped += 1
                continue
            group = str(row.get("group") or "all")
            prompt = judge_prompt_text(row["prompt_messages"])
            examples.append(
                Example(str(row.get("id", i)), group, prompt, [row["chosen"], row["rejected"]], {"label": "A>B"})
            )
            continue
        messages = row["messages"]
        user = next((m["content"] for m in messages if m["role"] == "user"), "")
        answer = next((m["content"] for m in reversed(messages) if m["role"] == "assistant"), "")
        found, gold = LAYOUT.search(user), parse_verdict(answer, pattern)
        if found is None or gold not in ("A", "B"):
            skipped += 1
            continue
        prompt, a, b = found.groups()
        if row.get("images"):  # a VLM judge's rows: the `<image>` placeholders take the row's images, in order
            from rmspec.inference.scorers.vision_prompts import with_image_parts

            prompt = with_image_parts(prompt, row["images"])
        examples.append(
            Example(
                str(row.get("id", i)),
                str(row.get("group") or "all"),
                prompt,
                [a, b],
                {"label": f"{gold}>{'AB'[gold == 'A']}"},
            )
        )
    return BenchmarkData("pairs", "validation split", None, examples), skipped


def evaluate_judge(
    rd: RunDir,
    loaded_spec: Any,
    results: dict[str, Any],
    *,
    model: Any,
    tokenizer: Any,
    validation: Any,
    requests: Sequence[Any],
    batch_size: int | None,
    progress: Callable[[str], None] | None,
) -> None:
    from rmspec.evaluate.benchmarks import load_benchmark
    from rmspec.inference.judge import JUDGE_KINDS, judge_rows
    from rmspec.inference.scorers.judge import JudgeEngine

    spec = loaded_spec.spec
    usable = [r for r in requests if r.kind in JUDGE_KINDS]
    for r in requests:
        if r.kind not in JUDGE_KINDS:
            results["notes"].append(
                f"{r.kind}: not scored for a generative judge (pairwise benchmarks only: {', '.join(JUDGE_KINDS)})"
            )
    engine = None
    if spec.eval.validation or usable:
        engine = JudgeEngine.load_judge(rd.model, spec, batch_size=batch_size)
        assert engine.verdict_pattern is not None  # load_judge sets it from approach.verdict_pattern

    def judged(data: Any) -> list[dict[str, Any]]:
        assert engine is not None and engine.verdict_pattern is not None
        return judge_rows(
            engine.model,
            engine.tokenizer,
            data,
            pattern=engine.verdict_pattern,
            max_new_tokens=engine.max_new_tokens,
            layout=engine.layout,
            batch_size=engine.batch_size,
            encoder=engine.encoder,
        )

    if spec.eval.validation and engine is not None:
        if validation is None:
            validation = prepare_validation(loaded_spec, engine.tokenizer, results["notes"], rd.root / "cache")
        data, skipped = validation_pairs(list(validation or []), spec.approach.verdict_pattern)
        if skipped:
            results["notes"].append(f"validation: {skipped} held-out rows are not in the judge prompt's layout")
        if data.examples:
            say(progress, f"judging the validation split: {len(data.examples)} pairs, both orders")
            rows = judged(data)
            path = rd.eval_dir / "validation.jsonl"
            res.write_jsonl(path, rows)
            entry = res.entry("validation", "validation", rows, path, source="validation split", scorer=JUDGE)
            verdicts = entry["diagnostics"].get("verdicts") or {}
            entry["metrics"] = {
                "verdict_accuracy_first_order": verdicts.get("accuracy_first_order"),
                "verdict_accuracy_swapped_order": verdicts.get("accuracy_swapped_order"),
                "verdict_accuracy": entry["overall"],  # both orders: JudgeBench's two games
            }
            results["validation"] = entry
    taken = set(results["benchmarks"])
    for request in usable:
        data = load_benchmark(
            request.kind,
            request.path,
            split=request.split,
            preset=request.preset,
            limit=request.limit,
            base_dir=loaded_spec.base_dir,
        )
        say(progress, f"judging {request.kind}: {len(data.examples)} pairs, both orders")
        rows = judged(data)
        name = res.unique_name(request.kind, request.path, taken, request.name)
        path = rd.eval_dir / f"{name}.jsonl"
        res.write_jsonl(path, rows)
        results["benchmarks"][name] = res.entry(
            name, request.kind, rows, path, source=data.source, split=data.split, scorer=JUDGE
        )
