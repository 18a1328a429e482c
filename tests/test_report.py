"""`rmspec report` and the HTML report, on a run directory fabricated from realistic files (no model, no torch)."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.ci import need
from rmspec.evaluate import results as res

IMG = re.compile(r'<img [^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def pair_rows(n: int, seed: int, subsets: list[str], shift: float = 1.0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        len_c, len_r = rng.randint(40, 900), rng.randint(40, 900)
        # A reward with a real signal and a mild length preference, as trained models have.
        chosen = rng.gauss(shift, 1.0) + 0.0008 * len_c
        rejected = rng.gauss(0.0, 1.0) + 0.0008 * len_r
        rows.append(
            {
                "id": f"ex-{i}",
                "subset": subsets[i % len(subsets)],
                "score_chosen": chosen,
                "score_rejected": rejected,
                "len_chosen": len_c,
                "len_rejected": len_r,
            }
        )
    return rows


def fabricate_evaluated_run(run: Path) -> Path:
    (run / "eval").mkdir(parents=True)
    results = res.new_results(str(run / "model"), "quickstart")
    validation = pair_rows(120, 0, ["facts", "safety", "format"])
    res.write_jsonl(run / "eval" / "validation.jsonl", validation)
    results["validation"] = res.entry(
        "validation", "validation", validation, run / "eval" / "validation.jsonl", source="validation split"
    )
    bench = pair_rows(200, 1, ["alpacaeval-easy", "mt-bench-hard", "donotanswer", "hep-go", "math-prm"], shift=0.6)
    res.write_jsonl(run / "eval" / "rewardbench.jsonl", bench)
    results["benchmarks"]["rewardbench"] = res.entry(
        "rewardbench", "rewardbench", bench, run / "eval" / "rewardbench.jsonl", source="allenai/reward-bench"
    )
    results["reward_stats"] = {"mean": 0.41, "std": 1.2, "source": "validation"}
    res.write_results(run / "results.json", results)
    metrics = [
        {
            "step": s,
            "epoch": s / 180,
            "train/rm/loss": 0.69 * 0.993**s,
            "train/rm/accuracy": min(0.95, 0.5 + 0.0025 * s),
            "train/rm/lr": 1e-4,
            "grad_norm": 1.0,
            "time": 1_700_000_000 + s,
        }
        for s in range(10, 181, 10)
    ]
    metrics += [
        {"step": s, "epoch": s / 180, "eval/rm/loss": 0.62 * 0.995**s, "eval/rm/accuracy": 0.5 + 0.002 * s}
        for s in (60, 120, 180)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (run / "data_report.json").write_text(
        json.dumps(
            {
                "rows_read": 3200,
                "rows_kept": 3150,
                "rejected": {"drop_empty": 20, "drop_identical": 30},
                "splits": {"train": 2835, "validation": 315},
                "length_heuristic_accuracy": 0.61,
            }
        )
    )
    (run / "plan.json").write_text(
        json.dumps(
            {
                "strategy": "single",
                "precision": "fp32",
                "num_processes": 1,
                "micro_batch_size": 16,
                "gradient_accumulation_steps": 1,
                "global_batch_size": 16,
                "launch_command": ["accelerate", "launch", "-m", "rmspec.launch.entrypoint"],
            }
        )
    )
    (run / "versions.json").write_text(
        json.dumps({"python": "3.11.9", "torch": "2.13.0", "transformers": "5.23.0", "rmspec": "0.1.0"})
    )
    (run / "status.json").write_text(json.dumps({"state": "completed", "step": 180}))
    return run


@pytest.fixture
def run_dir(tmp_path):
    return fabricate_evaluated_run(tmp_path / "runs" / "quickstart")


def test_report_command_is_light_and_writes_self_contained_html(run_dir):
    code = (
        "import sys; from rmspec.cli.main import main; sys.argv = ['rmspec', 'report', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'accelerate') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "rewardbench" in done.stdout and "validation" in done.stdout and "status: completed" in done.stdout
    html = (run_dir / "report.html").read_text()
    images = IMG.findall(html)
    # curves (loss, accuracy, learning rate); per entry: histogram, calibration, length bias; rewardbench: sections
    # and subsets bars
    assert len(images) == 3 + 3 + 3 + 2 + 1
    assert all(len(b) > 2000 for b in images)
    assert not re.search(r'(src|href)="(https?:)?//', html) and "<script" not in html and "<link" not in html
    for heading in ("Training", "Evaluation", "Data", "Plan that ran", "Environment"):
        assert f"<h2>{heading}</h2>" in html
    assert "3150" in html and "accelerate" in html and "5.23.0" in html


def test_report_figures_match_results(run_dir, cli):
    result = cli("report", run_dir)
    assert result.code == 0, result.err
    saved = res.read_results(run_dir / "results.json")
    overall = saved["benchmarks"]["rewardbench"]["overall"]
    assert f"{100 * overall:.1f}%" in result.out
    ece = saved["validation"]["diagnostics"]["calibration"]["ece"]
    assert f"ECE {ece:.3f}" in result.out
    html = (run_dir / "report.html").read_text()
    assert f"{100 * overall:.1f}%" in html


def test_report_recomputes_from_per_example_files(run_dir):
    saved = res.read_results(run_dir / "results.json")
    for entry in [saved["validation"], *saved["benchmarks"].values()]:
        rows = res.read_jsonl(Path(entry["per_example_path"]))
        again = res.entry(entry["name"], entry["kind"], rows, Path(entry["per_example_path"]))
        assert again["overall"] == entry["overall"] and again["sections"] == entry["sections"]


def test_report_survives_a_moved_run_dir(run_dir, tmp_path):
    from rmspec.evaluate.report import build_html

    moved = tmp_path / "elsewhere"
    shutil.move(str(run_dir), moved)
    assert len(IMG.findall(build_html(moved))) == 12


def test_report_errors(cli, tmp_path, run_dir):
    assert cli("report", tmp_path / "missing").code == 2
    (tmp_path / "empty").mkdir()
    result = cli("report", tmp_path / "empty")
    assert result.code == 2 and "does not look like a run directory" in result.err
    data = json.loads((run_dir / "results.json").read_text())
    data["schema_version"] = 99
    (run_dir / "results.json").write_text(json.dumps(data))
    result = cli("report", run_dir)
    assert result.code == 2 and "schema_version 99" in result.err


def test_report_of_an_unevaluated_run(cli, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "train/rm/loss": 0.7}) + "\n" + '{"step": 2, "train/rm/lo'
    )
    result = cli("report", run)
    assert result.code == 0, result.err
    assert "no results.json yet" in result.out
    assert "not been evaluated" in (run / "report.html").read_text()


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def test_html_report_renders_in_headless_browser(run_dir, tmp_path, cli):
    browser = _chromium()
    if browser is None:
        pytest.skip("no headless browser installed (chromium)")
    assert cli("report", run_dir).code == 0
    shot = tmp_path / "shot.png"
    profile = tmp_path / "profile"
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--hide-scrollbars",
            "--window-size=1200,2400",
            f"--screenshot={shot}",
            (run_dir / "report.html").resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), done.stderr[-2000:]
    matplotlib_image = need("matplotlib.image")
    pixels = matplotlib_image.imread(shot)
    assert pixels.shape[0] >= 2000 and pixels.shape[1] >= 1000
    # Not blank: many distinct colours, and plot colours (chosen green / rejected red) present.
    rgb = (pixels[..., :3] * 255).astype(int).reshape(-1, 3)
    distinct = {tuple(p) for p in rgb[:: max(1, len(rgb) // 200_000)]}
    assert len(distinct) > 200
    assert pixels[..., :3].std() > 0.05


def test_rm_bench_matrix_table_in_report(tmp_path):
    from rmspec.evaluate.benchmarks import load_benchmark, per_example_rows
    from rmspec.evaluate.report import build_html

    fixtures = Path(__file__).parent / "fixtures" / "benchmarks"
    data = load_benchmark("rm_bench", str(fixtures / "rm_bench.json"))
    rows = per_example_rows(data, [[float(len(r.split())) for r in ex.responses] for ex in data.examples])
    run = tmp_path / "run"
    res.write_jsonl(run / "eval" / "rm_bench.jsonl", rows)
    results = res.new_results("m")
    results["benchmarks"]["rm_bench"] = res.entry("rm_bench", "rm_bench", rows, run / "eval" / "rm_bench.jsonl")
    res.write_results(run / "results.json", results)
    html = build_html(run)
    assert "chat: chosen style (rows) beats rejected style (columns)" in html
    # chat row "concise": 3 words beats rejected 2 only -> 100.0%, 0.0%, 0.0%
    assert re.search(r"<td>concise</td><td class=num>100.0%</td><td class=num>0.0%</td><td class=num>0.0%</td>", html)


def test_eval_help_is_light():
    code = (
        "import sys; from rmspec.cli.main import main; sys.argv = ['rmspec', 'eval', '--help']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'accelerate') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "--benchmark" in done.stdout and "--json" in done.stdout
