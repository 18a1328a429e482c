"""A benchmark kind from outside rmspec is one module (tests/helpers/toy_benchmark.py) plus one registry
line: a spec naming it in eval.benchmarks validates, `rmspec eval` scores a model folder on it, and the
figure equals the share of good-over-bad pairs computed here with plain transformers; once removed,
the kind is an unknown choice again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers import toy_benchmark  # noqa: E402
from helpers.scoring_models import build_tiny_bert  # noqa: E402
from rmspec.evaluate import registry  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ROWS = [
    {"question": "What is 2 + 2?", "good": "4", "bad": "5", "topic": "math"},
    {"question": "Capital of France?", "good": "Paris", "bad": "Lyon, I believe", "topic": "facts"},
    {"question": "What is 3 x 3?", "good": "nine", "bad": "it is six", "topic": "math"},
    {"question": "Largest ocean?", "good": "the Pacific", "bad": "Atlantic", "topic": "facts"},
    {"question": "Opposite of hot?", "good": "cold", "bad": "warm or so", "topic": "words"},
]


@pytest.fixture
def toy_kind():
    registry.register(toy_benchmark.INFO, toy_benchmark.KIND)  # the one registry line
    yield toy_benchmark.INFO.name
    registry.unregister(toy_benchmark.INFO.name)


def _rows(tmp_path: Path) -> Path:
    path = tmp_path / "toy.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def _spec(tmp_path: Path, rows: Path) -> Path:
    text = (REPO / "specs" / "quickstart.yaml").read_text()
    text = text.replace(
        "    - kind: pairs\n      path: ../rmspec/data/demo/benchmark_pairs.jsonl",
        f"    - kind: toy_pairs\n      path: {rows}",
    )
    text = text.replace("../rmspec/data/demo/", f"{REPO}/rmspec/data/demo/")
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    return spec


def plain_score(model_dir: Path, prompt: str, response: str) -> float:
    """A few lines of plain transformers: the (prompt, response) text pair through the classifier."""
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return model(**tok(prompt, response, return_tensors="pt")).logits[0, 0].item()


def test_a_spec_naming_the_toy_kind_validates(cli, tmp_path, toy_kind):
    result = cli("validate", _spec(tmp_path, _rows(tmp_path)))
    assert result.code == 0, result.err


def test_without_its_line_the_kind_is_unknown(cli, tmp_path):
    result = cli("validate", _spec(tmp_path, _rows(tmp_path)))
    assert result.code == 2 and "toy_pairs" in result.err and "rewardbench" in result.err


def test_eval_scores_the_toy_kind_as_plain_transformers_does(cli, tmp_path, toy_kind):
    model = build_tiny_bert(tmp_path / "bert")
    out = tmp_path / "out"
    result = cli("eval", model, "--benchmark", f"{toy_kind}={_rows(tmp_path)}", "--out", out, "--json")
    assert result.code == 0, result.err
    printed = json.loads(result.out)[toy_kind]
    good = [plain_score(model, r["question"], r["good"]) for r in ROWS]
    bad = [plain_score(model, r["question"], r["bad"]) for r in ROWS]
    saved = [json.loads(x) for x in (out / f"{toy_kind}.jsonl").read_text().splitlines()]
    assert [s["score_chosen"] for s in saved] == pytest.approx(good, abs=1e-4)
    assert [s["score_rejected"] for s in saved] == pytest.approx(bad, abs=1e-4)
    wins = [g > b for g, b in zip(good, bad)]
    assert 0 < sum(wins) < len(wins), "the tiny model must rank some pairs right and some wrong"
    assert printed["overall"] == pytest.approx(sum(wins) / len(wins))
    math = [w for w, r in zip(wins, ROWS) if r["topic"] == "math"]
    assert printed["subsets"]["math"] == pytest.approx(sum(math) / len(math))
