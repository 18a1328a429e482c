"""`rmspec eval RUN_DIR --out DIR` used to accept --out and write to RUN/eval and RUN/results.json
anyway: the flag did nothing. A run's evaluation belongs to the run (report and status read it
there), so --out on a run directory is refused (exit 2) before anything is loaded or written, and the
hint says how to evaluate elsewhere: the run's model folder, which honours --out."""

from __future__ import annotations

from pathlib import Path

from helpers.ci import need

need("torch")

from helpers.fabricated_run import fabricate_run  # noqa: E402
from helpers.scoring_models import build_tiny_bert  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"


def test_out_on_a_run_dir_is_refused(cli, tmp_path):
    run = fabricate_run(tmp_path / "run", build_tiny_bert(tmp_path / "bert"), FIXTURES / "pairs.jsonl")
    out = tmp_path / "elsewhere"
    result = cli("eval", run, "--out", out, "--json")
    assert result.code == 2, result.out + result.err
    assert "--out" in result.err and str(run / "model") in result.err
    assert not out.exists() and not (run / "results.json").exists() and not (run / "eval").exists()


def test_out_on_a_model_folder_is_where_results_go(cli, tmp_path):
    model = build_tiny_bert(tmp_path / "bert")
    out = tmp_path / "elsewhere"
    result = cli("eval", model, "--benchmark", f"pairs={FIXTURES / 'pairs.jsonl'}", "--out", out, "--json")
    assert result.code == 0, result.out + result.err
    assert (out / "results.json").exists() and (out / "pairs.jsonl").exists()
