"""`rmspec eval` on a model folder and on a fabricated run directory, against plain transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers import REPO  # noqa: E402
from helpers.fabricated_run import fabricate_run  # noqa: E402
from helpers.scoring_models import build_tiny_bert  # noqa: E402  (tests/ is on sys.path under pytest)

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


def plain_scores(model_dir: Path, prompt: str, responses: list[str]) -> list[float]:
    """A few lines of plain transformers: one (prompt, response) text pair at a time."""
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    out = []
    with torch.no_grad():
        for response in responses:
            enc = tok(prompt, response, return_tensors="pt")
            out.append(model(**enc).logits[0, 0].item())  # segment ids included, as plain users pass them
    return out


def test_eval_model_folder_matches_plain_transformers(cli, bert_dir, tmp_path):
    out = tmp_path / "out"
    result = cli(
        "eval",
        bert_dir,
        "--benchmark",
        "pairs",
        "--path",
        FIXTURES / "pairs.jsonl",
        "--benchmark",
        f"rewardbench2={FIXTURES / 'rewardbench2.jsonl'}",
        "--batch-size",
        "3",
        "--out",
        out,
        "--json",
    )
    assert result.code == 0, result.err
    printed = json.loads(result.out)
    assert set(printed) == {"pairs", "rewardbench2"}
    pairs = printed["pairs"]
    assert 0.0 <= pairs["overall"] <= 1.0 and set(pairs["subsets"]) == {"math", "chat"}
    rows = [json.loads(line) for line in Path(pairs["per_example_path"]).read_text().splitlines()]
    source = [json.loads(line) for line in (FIXTURES / "pairs.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [s["id"] for s in source]
    for row, src in zip(rows, source):
        chosen, rejected = plain_scores(bert_dir, src["prompt"], [src["chosen"], src["rejected"]])
        assert row["score_chosen"] == pytest.approx(chosen, abs=1e-5)
        assert row["score_rejected"] == pytest.approx(rejected, abs=1e-5)
    # The printed overall is the strict accuracy of those per-example scores.
    assert pairs["overall"] == pytest.approx(sum(r["score_chosen"] > r["score_rejected"] for r in rows) / len(rows))

    bon = printed["rewardbench2"]
    bon_rows = [json.loads(line) for line in Path(bon["per_example_path"]).read_text().splitlines()]
    first = json.loads((FIXTURES / "rewardbench2.jsonl").read_text().splitlines()[0])
    assert bon_rows[0]["scores"] == pytest.approx(
        plain_scores(bert_dir, first["prompt"], first["chosen"] + first["rejected"]), abs=1e-5
    )
    assert json.loads((out / "results.json").read_text())["schema_version"] == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (("eval", "{tmp}/missing", "--benchmark", "pairs"), "no such run directory or model folder"),
        (("eval", "{model}", "--benchmark", "pairs", "--path", "{tmp}/nope.jsonl"), "file not found"),
        (("eval", "{model}"), "add --benchmark"),
        (("eval", "{model}", "--benchmark", "mmlu"), "unknown benchmark"),
        (
            ("eval", "{model}", "--benchmark", "pairs", "--benchmark", "rewardbench", "--path", "x.jsonl"),
            "which file goes with which",
        ),
        (("eval", "{tmp}", "--benchmark", "pairs", "--path", "{pairs}"), "config.json"),
    ],
)
def test_eval_errors_exit_2(cli, bert_dir, tmp_path, args, message):
    args = [a.format(tmp=tmp_path, model=bert_dir, pairs=FIXTURES / "pairs.jsonl") for a in args]
    result = cli(*args)
    assert result.code == 2
    assert message in result.err
    assert "Traceback" not in result.err


# ----------------------------------------------------------------- a run directory


def _encoded(side: str, enc) -> dict:
    return {f"{side}_input_ids": enc.ids, f"{side}_token_type_ids": enc.type_ids}


def validation_split(model_dir: Path) -> list[dict]:
    """Rows shaped like rmspec.data.prepare's validation split (bradley_terry columns)."""
    from rmspec.inference.encoding import encode

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    rows = []
    for line in (FIXTURES / "pairs.jsonl").read_text().splitlines():
        src = json.loads(line)
        rows.append(
            {
                "id": src["id"],
                "group": src["family"],
                "prompt": src["prompt"],
                "chosen": src["chosen"],
                "rejected": src["rejected"],
                "margin": 0.0,
                **_encoded("chosen", encode(tok, src["prompt"], src["chosen"], 256)),
                **_encoded("rejected", encode(tok, src["prompt"], src["rejected"], 256)),
            }
        )
    return rows


def test_evaluate_run_writes_results_eval_config_and_report(bert_dir, tmp_path):
    from rmspec.evaluate.run_level import evaluate_run
    from rmspec.spec import load_spec

    run = fabricate_run(tmp_path / "run", bert_dir, FIXTURES / "pairs.jsonl")
    loaded = load_spec(run / "spec.yaml")
    results = evaluate_run(run, loaded, validation=validation_split(bert_dir))

    saved = json.loads((run / "results.json").read_text())
    assert saved["schema_version"] == 1 and saved == json.loads(json.dumps(results))
    assert set(saved["benchmarks"]) == {"pairs"}
    assert (run / "eval" / "pairs.jsonl").exists() and (run / "eval" / "validation.jsonl").exists()
    # The validation split was scored from its token ids; same texts, same scores as the benchmark file.
    val = [json.loads(x) for x in (run / "eval" / "validation.jsonl").read_text().splitlines()]
    bench = [json.loads(x) for x in (run / "eval" / "pairs.jsonl").read_text().splitlines()]
    assert [v["score_chosen"] for v in val] == pytest.approx([b["score_chosen"] for b in bench], abs=1e-5)
    config = json.loads((run / "model" / "config.json").read_text())
    every = [v["score_chosen"] for v in val] + [v["score_rejected"] for v in val]
    mean = sum(every) / len(every)
    assert config["reward_mean"] == pytest.approx(mean)
    assert config["reward_std"] == pytest.approx((sum((x - mean) ** 2 for x in every) / len(every)) ** 0.5)
    html = (run / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') >= 6


def test_eval_run_dir_from_cli_rebuilds_validation_with_the_data_pipeline(cli, bert_dir, tmp_path):
    run = fabricate_run(tmp_path / "run", bert_dir, FIXTURES / "pairs.jsonl")
    result = cli("eval", run, "--json")
    assert result.code == 0, result.err
    printed = json.loads(result.out)
    assert list(printed) == ["pairs", "validation"]
    assert Path(printed["pairs"]["per_example_path"]).parent == (run / "eval").resolve()
    saved = json.loads((run / "results.json").read_text())
    assert saved["notes"] == []
    # The validation rows are the split the data pipeline holds out of the 60-row slice.
    from rmspec.data import prepare
    from rmspec.spec import load_spec

    tok = transformers.AutoTokenizer.from_pretrained(run / "model")
    held_out = prepare(load_spec(run / "spec.yaml"), tok).validation
    val = [json.loads(x) for x in (run / "eval" / "validation.jsonl").read_text().splitlines()]
    assert [v["id"] for v in val] == [str(i) for i in held_out["id"]] and len(val) >= 3
    assert saved["reward_stats"]["source"] == "validation"


def test_backbone_without_head_is_flagged_and_causal_lm_refused(cli, tmp_path):
    from helpers.scoring_models import _tokenizer

    tok = _tokenizer()
    small = dict(
        vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=1, intermediate_size=16
    )
    transformers.BertModel(transformers.BertConfig(**small)).save_pretrained(tmp_path / "encoder")
    tok.save_pretrained(tmp_path / "encoder")
    result = cli(
        "eval",
        tmp_path / "encoder",
        "--benchmark",
        f"pairs={FIXTURES / 'pairs.jsonl'}",
        "--out",
        tmp_path / "o",
        "--json",
    )
    assert result.code == 0, result.err
    notes = json.loads((tmp_path / "o" / "results.json").read_text())["notes"]
    assert any("random head" in n for n in notes)

    transformers.LlamaForCausalLM(transformers.LlamaConfig(**small, num_key_value_heads=1)).save_pretrained(
        tmp_path / "lm"
    )
    tok.save_pretrained(tmp_path / "lm")
    result = cli("eval", tmp_path / "lm", "--benchmark", f"pairs={FIXTURES / 'pairs.jsonl'}")
    assert result.code == 2 and "causal language model" in result.err


def test_run_spec_as_run_with_relative_paths_and_sets(cli, bert_dir, tmp_path):
    """As the trainer writes it: RUN/spec.yaml is the merged spec (--set applied) with the original
    relative paths; plan.json names the original spec file and the --set list."""
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    shutil.copytree(bert_dir, run / "model")
    spec_text = (
        (REPO / "specs" / "quickstart.yaml")
        .read_text()
        .replace("    kind: files\n", "    kind: files\n    limit: 60\n", 1)
    )
    (run / "spec.yaml").write_text(spec_text)
    (run / "plan.json").write_text(
        json.dumps({"spec_path": str(REPO / "specs" / "quickstart.yaml"), "sets": ["data.source.limit=60"]})
    )
    result = cli("eval", run, "--benchmark", f"pairs={FIXTURES / 'pairs.jsonl'}", "--json")
    assert result.code == 0, result.err
    printed = json.loads(result.out)
    # The validation split of the 60-row run (not of the full 3,200-row file).
    assert 3 <= printed["validation"]["num_examples"] <= 10
