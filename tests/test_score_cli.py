"""`rmspec score`: every input format and row shape, rejects that reconcile, --resume without
re-scoring, pointwise columns; scores checked against plain transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers.serving import build_spread_bert  # noqa: E402

ROWS = [
    {"id": 0, "prompt": "What colour is the sky?", "response": "Blue on a clear day.", "note": "a"},
    {"id": 1, "prompt": "Add 2 and 2.", "response": "4", "note": "b"},
    {"id": 2, "prompt": "Name a river.", "response": "The Danube, which flows through ten countries.", "note": "c"},
    {"id": 3, "prompt": "Say hi.", "response": "hi", "note": "d"},
    {
        "id": 4,
        "prompt": "Longest word?",
        "response": "Pneumonoultramicroscopicsilicovolcanoconiosis, arguably.",
        "note": "e",
    },
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_spread_bert(tmp_path_factory.mktemp("score_bert"), mean=None)


@pytest.fixture(scope="module")
def plain(model_dir):
    """Plain transformers: the text pair with its segment ids, one at a time."""
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()

    def score(prompt: str, response: str) -> list[float]:
        with torch.no_grad():
            return model(**tok(prompt, response, return_tensors="pt")).logits[0].tolist()

    return score


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def write_inputs(tmp: Path, rows: list[dict]) -> dict[str, Path]:
    import datasets
    import pandas as pd

    paths = {
        "jsonl": tmp / "in.jsonl",
        "json": tmp / "in.json",
        "parquet": tmp / "in.parquet",
        "csv": tmp / "in.csv",
        "disk": tmp / "in_disk",
    }
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    paths["json"].write_text(json.dumps(rows))
    pd.DataFrame(rows).to_parquet(paths["parquet"])
    pd.DataFrame(rows).to_csv(paths["csv"], index=False)
    datasets.Dataset.from_list(rows).save_to_disk(str(paths["disk"]))
    return paths


def test_every_format_scores_like_plain_transformers(cli, model_dir, plain, tmp_path):
    paths = write_inputs(tmp_path, ROWS)
    expected = [plain(r["prompt"], r["response"])[0] for r in ROWS]
    for fmt, path in paths.items():
        out = tmp_path / f"out_{fmt}.jsonl"
        result = cli("score", model_dir, path, "--out", out, "--batch-size", "2", "--json")
        assert result.code == 0, (fmt, result.err)
        summary = json.loads(result.out)
        assert summary["scored"] == 5 and summary["rejected"] == 0 and summary["rows_read"] == 5
        rows = read(out)
        assert [r["reward"] for r in rows] == pytest.approx(expected, abs=1e-5), fmt
        assert list(rows[0]) == [
            "id",
            "prompt",
            "response",
            "note",
            "reward",
            "truncated",
        ]  # input columns first, in order
        assert "reward_normalized" not in rows[0]  # no reward_mean/reward_std in this model's config
    csv_out = tmp_path / "out.csv"
    assert cli("score", model_dir, paths["jsonl"], "--out", csv_out).code == 0
    assert csv_out.read_text().splitlines()[0] == "id,prompt,response,note,reward,truncated"


def test_shapes_columns_and_conversations(cli, model_dir, plain, tmp_path):
    rows = [{"q": r["prompt"], "a": r["response"]} for r in ROWS[:3]]
    src = tmp_path / "qa.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = cli(
        "score", model_dir, src, "--out", tmp_path / "qa_out.jsonl", "--columns", "prompt=q,response=a", "--json"
    )
    assert result.code == 0, result.err
    assert [r["reward"] for r in read(tmp_path / "qa_out.jsonl")] == pytest.approx(
        [plain(r["q"], r["a"])[0] for r in rows], abs=1e-5
    )
    # Without --columns nothing says which column is which: exit 2 with the fix.
    result = cli("score", model_dir, src, "--out", tmp_path / "x.jsonl")
    assert result.code == 2 and "--columns" in result.err
    # Messages, and pairs given as whole conversations (hh-rlhf style).
    conv = [
        {"messages": [{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["response"]}]}
        for r in ROWS[:2]
    ]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in conv))
    assert cli("score", model_dir, tmp_path / "m.jsonl", "--out", tmp_path / "m_out.jsonl").code == 0
    assert [r["reward"] for r in read(tmp_path / "m_out.jsonl")] == pytest.approx(
        [plain(r["prompt"], r["response"])[0] for r in ROWS[:2]], abs=1e-5
    )
    pair = {"chosen": conv[0]["messages"], "rejected": [conv[0]["messages"][0], {"role": "assistant", "content": "no"}]}
    (tmp_path / "hh.jsonl").write_text(json.dumps(pair) + "\n")
    assert cli("score", model_dir, tmp_path / "hh.jsonl", "--out", tmp_path / "hh_out.jsonl").code == 0
    row = read(tmp_path / "hh_out.jsonl")[0]
    assert row["reward_chosen"] == pytest.approx(plain(ROWS[0]["prompt"], ROWS[0]["response"])[0], abs=1e-5)
    assert row["reward_rejected"] == pytest.approx(plain(ROWS[0]["prompt"], "no")[0], abs=1e-5)
    assert row["margin"] == pytest.approx(row["reward_chosen"] - row["reward_rejected"])


def test_rejects_have_reasons_and_counts_reconcile(cli, model_dir, tmp_path):
    src = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps(ROWS[0]),
        "{broken json",
        json.dumps({"prompt": "p"}),
        json.dumps({"prompt": "p", "response": "   "}),
        json.dumps(ROWS[1]),
        "[1, 2]",
        json.dumps({"prompt": ["not", "messages"], "response": "r"}),
    ]
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "mixed_out.jsonl"
    result = cli("score", model_dir, src, "--out", out, "--json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["rows_read"] == 7 and summary["scored"] == 2 and summary["rejected"] == 5
    assert (
        summary["rows_read"]
        == summary["scored"] + summary["rejected"]
        == sum(summary["rejected_by_reason"].values()) + 2
    )
    rejects = read(out.with_name("mixed_out.rejects.jsonl"))
    assert [r["row"] for r in rejects] == [1, 2, 3, 5, 6]
    reasons = [r["reason"] for r in rejects]
    assert (
        "not valid JSON" in reasons[0] and reasons[1] == "missing field 'response'" and reasons[2] == "empty response"
    )
    assert "not a JSON object" in reasons[3] and "message 0" in reasons[4]
    assert [r["id"] for r in read(out)] == [0, 1]
    # An existing output is neither overwritten nor appended to by accident.
    result = cli("score", model_dir, src, "--out", out)
    assert result.code == 2 and "--resume" in result.err and "--overwrite" in result.err


def test_resume_continues_without_rescoring(cli, model_dir, tmp_path, monkeypatch):
    from rmspec.inference.engine import RewardEngine
    from rmspec.score import runner

    rows = [{"id": i, "prompt": f"question {i}", "response": "answer " * (1 + i % 5)} for i in range(10)]
    src = tmp_path / "many.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    engine = RewardEngine.load(model_dir)
    clean = tmp_path / "clean.jsonl"
    runner.score_file(engine, src, clean, target=str(model_dir), chunk_rows=3)

    out = tmp_path / "resumed.jsonl"
    calls = []

    def stop_after_two_chunks(done, total):
        calls.append(done)
        if done >= 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.score_file(engine, src, out, target=str(model_dir), chunk_rows=3, progress=stop_after_two_chunks)
    with out.open("a") as f:  # a chunk half written when the process died
        f.write('{"id": 6, "prompt": "quest')
    scored_rows = []
    original = runner._score_chunk
    monkeypatch.setattr(
        runner,
        "_score_chunk",
        lambda eng, shape, chunk, first, bs: (
            scored_rows.extend(range(first, first + len(chunk))) or original(eng, shape, chunk, first, bs)
        ),
    )
    summary = runner.score_file(engine, src, out, target=str(model_dir), chunk_rows=3, resume=True)
    assert scored_rows == [6, 7, 8, 9]  # the finished rows were not scored again
    assert summary["resumed_from_row"] == 6 and summary["rows_read"] == 10 and summary["scored"] == 10
    assert read(out) == read(clean)
    result = cli("score", model_dir, src, "--out", out, "--resume", "--json")
    assert result.code == 0 and json.loads(result.out)["already_complete"] is True


def test_pointwise_model_writes_one_column_per_attribute(cli, tmp_path):
    from helpers.scoring_models import build_tiny_bert

    directory = build_tiny_bert(tmp_path / "pw")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        directory,
        num_labels=2,
        id2label={0: "helpfulness", 1: "safety"},
        label2id={"helpfulness": 0, "safety": 1},
        ignore_mismatched_sizes=True,
    )
    model.save_pretrained(directory)
    src = tmp_path / "pw.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2]))
    assert cli("score", directory, src, "--out", tmp_path / "pw_out.jsonl").code == 0
    rows = read(tmp_path / "pw_out.jsonl")
    tok = transformers.AutoTokenizer.from_pretrained(directory)
    reference = transformers.AutoModelForSequenceClassification.from_pretrained(directory).eval()
    for row, src_row in zip(rows, ROWS):
        with torch.no_grad():
            logits = reference(**tok(src_row["prompt"], src_row["response"], return_tensors="pt")).logits[0].tolist()
        assert [row["helpfulness"], row["safety"]] == pytest.approx(logits, abs=1e-5)
        assert "reward" not in row


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda t: t / "missing.jsonl", "file not found"),
        (lambda t: (t / "data.txt").write_text("x") and t / "data.txt", "cannot tell the format"),
    ],
)
def test_input_errors_exit_2(cli, model_dir, tmp_path, make, message):
    result = cli("score", model_dir, make(tmp_path), "--out", tmp_path / "o.jsonl")
    assert result.code == 2 and message in result.err and "Traceback" not in result.err


def test_run_directory_scores_as_its_eval(cli, model_dir, tmp_path):
    """A run directory: the run's spec decides layout and max_length; score equals eval per example."""
    from helpers import BENCHMARKS as FIXTURES
    from helpers.fabricated_run import fabricate_run

    run = fabricate_run(tmp_path / "run", model_dir, FIXTURES / "pairs.jsonl")
    result = cli("eval", run, "--benchmark", f"pairs={FIXTURES / 'pairs.jsonl'}", "--json")
    assert result.code == 0, result.err
    evaluated = read(Path(json.loads(result.out)["pairs"]["per_example_path"]))
    result = cli("score", run, FIXTURES / "pairs.jsonl", "--out", tmp_path / "s.jsonl", "--json")
    assert result.code == 0, result.err
    scored = read(tmp_path / "s.jsonl")
    assert [s["reward_chosen"] for s in scored] == pytest.approx([e["score_chosen"] for e in evaluated], abs=1e-5)
    assert [s["reward_rejected"] for s in scored] == pytest.approx([e["score_rejected"] for e in evaluated], abs=1e-5)


def test_bytes_that_are_not_utf8(cli, model_dir, tmp_path):
    """A Latin-1 line in JSONL is one reject with its place; a JSON/CSV document with one is a located error."""
    src = tmp_path / "legacy.jsonl"
    latin = json.dumps({"prompt": "Order a coffee.", "response": "caf\u00e9"}, ensure_ascii=False).encode("latin-1")
    src.write_bytes(json.dumps(ROWS[0]).encode() + b"\n" + latin + b"\n" + json.dumps(ROWS[1]).encode() + b"\n")
    out = tmp_path / "legacy_out.jsonl"
    result = cli("score", model_dir, src, "--out", out, "--json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert (summary["rows_read"], summary["scored"], summary["rejected"]) == (3, 2, 1)
    (reject,) = read(out.with_name("legacy_out.rejects.jsonl"))
    assert reject["row"] == 1 and reject["reason"].startswith("encoding: line 2, byte 0xe9 at column")
    assert [r["id"] for r in read(out)] == [0, 1]

    csv_src = tmp_path / "legacy.csv"
    csv_src.write_bytes(b"prompt,response\nOrder a coffee.,caf\xe9\n")
    result = cli("score", model_dir, csv_src, "--out", tmp_path / "csv_out.jsonl")
    assert result.code == 2 and "legacy.csv:2:" in result.err and "not UTF-8" in result.err
    assert "Traceback" not in result.err
