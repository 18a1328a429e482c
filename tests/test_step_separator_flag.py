"""A process reward model saved without rmspec's config, whose tokenizer drops "\\n" (TRL's default
separator), is usable: `rmspec score` and `rmspec eval` take `--step-separator`, and the scores are
the ones TRL's layout gives with that separator (checked against plain transformers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

SEP = " w79"


@pytest.fixture(scope="module")
def trl_prm(tmp_path_factory) -> Path:
    """A token classifier with 2 labels and a whitespace word-level tokenizer: "\\n" is nothing to it."""
    from helpers.scoring_models import build_trl_style_prm

    return build_trl_style_prm(tmp_path_factory.mktemp("trl_prm"), seed=3)


def trl_reference(folder: Path, prompt: str, steps: list[str]) -> list[float]:
    """TRL PRMTrainer's layout: [bos] + prompt + (step + separator) per step, P(label 1) at each separator."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForTokenClassification.from_pretrained(folder).eval()
    enc = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    ids = ([tok.bos_token_id] if tok.bos_token_id is not None else []) + enc(prompt)
    ends = []
    for s in steps:
        ids += enc(s) + enc(SEP)
        ends.append(len(ids) - 1)
    with torch.no_grad():
        probs = model(input_ids=torch.tensor([ids])).logits.softmax(-1)[0, :, 1]
    return [probs[e].item() for e in ends]


ROWS = [
    {"id": "a", "problem": "w1 w2", "steps": ["w3 w4", "w5", "w6 w7"]},
    {"id": "b", "problem": "w8", "steps": ["w9", "w10"]},
]


def test_score_without_flag_names_the_flag_that_exists(trl_prm, tmp_path, cli):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    result = cli("score", trl_prm, src, "--out", tmp_path / "out.jsonl", "--json")
    assert result.code == 2, result.out + result.err
    assert "--step-separator" in result.err
    help_text = cli("score", "--help").out
    assert "--step-separator" in help_text


def test_score_with_step_separator(trl_prm, tmp_path, cli):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "scored.jsonl"
    result = cli("score", trl_prm, src, "--out", out, "--json", "--step-separator", SEP)
    assert result.code == 0, result.out + result.err
    scored = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in scored] == ["a", "b"]
    for row in scored:
        assert row["step_scores"] == pytest.approx(trl_reference(trl_prm, row["problem"], row["steps"]), abs=1e-5)


def test_eval_with_step_separator(trl_prm, tmp_path, cli):
    bench = tmp_path / "pb.jsonl"
    rows = [
        {
            "id": "x",
            "generator": "g",
            "problem": "w1 w2",
            "steps": ["w3", "w4 w5"],
            "label": -1,
            "final_answer_correct": True,
        },
        {
            "id": "y",
            "generator": "g",
            "problem": "w6",
            "steps": ["w7", "w8"],
            "label": 1,
            "final_answer_correct": False,
        },
    ]
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "eval"
    no_flag = cli("eval", trl_prm, "--benchmark", f"processbench={bench}", "--out", out, "--json")
    assert no_flag.code == 2 and "--step-separator" in no_flag.err, no_flag.out + no_flag.err
    result = cli(
        "eval", trl_prm, "--benchmark", f"processbench={bench}", "--out", out, "--json", "--step-separator", SEP
    )
    assert result.code == 0, result.out + result.err
    per_example = [json.loads(x) for x in next(out.glob("*.jsonl")).read_text().splitlines()]
    assert len(per_example) == 2
    got = {r["id"]: r for r in per_example}
    for row in rows:
        scores = next(v for k, v in got[row["id"]].items() if k in ("step_scores", "scores"))
        assert scores == pytest.approx(trl_reference(trl_prm, row["problem"], row["steps"]), abs=1e-5)
