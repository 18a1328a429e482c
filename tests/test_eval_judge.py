"""Generative judge: verdict parsing, JudgeBench's two-game scoring, and a tiny judge run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.ci import need
from rmspec.evaluate.scoring_rules import score_judge, score_rows
from rmspec.inference.judge import JUDGE_INSTRUCTION, judge_message, parse_verdict

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
PATTERN = r"\[\[(A|B)\]\]"


def test_parse_verdict():
    assert parse_verdict("Response A is right. [[A]]", PATTERN) == "A"
    assert parse_verdict("[[B]] ... so [[B]]", PATTERN) == "B"
    assert parse_verdict("[[A]] or maybe [[B]]", PATTERN) is None  # names both: no verdict
    assert parse_verdict("I cannot decide.", PATTERN) is None


def test_judge_prompt_is_the_training_format():
    first = json.loads((REPO / "rmspec/data/demo/judge_messages.jsonl").read_text().splitlines()[0])
    user = first["messages"][0]["content"]
    assert user.startswith(JUDGE_INSTRUCTION + "\n\n[Prompt]\n")
    prompt = user.split("[Prompt]\n", 1)[1].split("\n\n[Response A]\n", 1)[0]
    a = user.split("[Response A]\n", 1)[1].split("\n\n[Response B]\n", 1)[0]
    b = user.split("[Response B]\n", 1)[1]
    assert judge_message(prompt, a, b) == user


def test_two_game_scoring_by_hand():
    labels = ["A>B", "B>A", "A>B"]
    verdicts = ["A", "A", None]
    swapped = ["B", "B", "B"]
    # 1: right both times (+2); 2: wrong both times (-2); 3: unparsed then right (+1)
    result = score_judge("judgebench", ["mmlu-pro-law", "livecodebench", "livecodebench"], labels, verdicts, swapped)
    assert result.overall == pytest.approx(2 / 3)
    assert result.sections == {"knowledge": 1.0, "coding": 0.5}
    rows = [
        {"id": str(i), "subset": "x", "source": s, "label": lab, "verdict": v, "verdict_swapped": w}
        for i, (s, lab, v, w) in enumerate(
            zip(["mmlu-pro-law", "livecodebench", "livecodebench"], labels, verdicts, swapped)
        )
    ]
    assert score_rows("judgebench", rows).overall == pytest.approx(2 / 3)


def test_generative_run_is_judged_in_both_orders(tmp_path):
    torch = need("torch")
    transformers = need("transformers")
    from helpers.models import tiny_judge_parts
    from rmspec.evaluate.run_level import evaluate_run
    from rmspec.spec import load_spec

    tokenizer, config = tiny_judge_parts(
        "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    torch.manual_seed(0)
    run = tmp_path / "run"
    transformers.LlamaForCausalLM(config).save_pretrained(run / "model")
    tokenizer.save_pretrained(run / "model")
    spec_text = (REPO / "specs" / "judge_generative.yaml").read_text()
    spec_text = spec_text.replace(
        "../rmspec/data/demo/judge_messages.jsonl", str(REPO / "rmspec/data/demo/judge_messages.jsonl")
    )
    spec_text = spec_text.replace("max_new_tokens: 32", "max_new_tokens: 3")
    spec_text = spec_text.replace(
        "    - kind: judgebench\n",
        f"    - kind: judgebench\n      path: {FIXTURES / 'judgebench.jsonl'}\n    - kind: rm_bench\n",
    )
    (run / "spec.yaml").write_text(spec_text)

    results = evaluate_run(run, load_spec(run / "spec.yaml"))
    entry = results["benchmarks"]["judgebench"]
    rows = [json.loads(x) for x in (run / "eval" / "judgebench.jsonl").read_text().splitlines()]
    assert len(rows) == 5 and all(
        set(r) >= {"verdict", "verdict_swapped", "output", "output_swapped", "label"} for r in rows
    )
    assert all(isinstance(r["output"], str) for r in rows)
    # Figures recompute from the rows by the two-game rule.
    expected = score_judge(
        "judgebench",
        [r["source"] for r in rows],
        [r["label"] for r in rows],
        [r["verdict"] for r in rows],
        [r["verdict_swapped"] for r in rows],
    )
    assert entry["overall"] == expected.overall
    assert entry["diagnostics"]["verdicts"]["n"] == 5
    assert any("rm_bench: not scored for a generative judge" in n for n in results["notes"])
    assert "judge verdicts (both orders)" in (run / "report.html").read_text()
