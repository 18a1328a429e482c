"""The sweep report tells when its best trial is not better than the rest by more than noise (issue 42
item 14): each objective's standard error (binomial over the examples, by hand here), the trials within 2
standard errors of the best named, and the caveat above importances computed from few trials."""

from __future__ import annotations

import math

from helpers.ci import need

need("optuna")  # rmspec.sweep.outputs imports it


def _results(overall: float, n: int) -> dict:
    return {"validation": {"overall": overall, "num_examples": n, "subsets": {"math": 0.5}, "counts": {"math": 40}}}


def test_binomial_standard_error_of_overall_and_of_a_subset():
    from rmspec.sweep.noise import binomial_stderr

    se, how = binomial_stderr(_results(0.563, 327), "validation.overall")
    assert se == math.sqrt(0.563 * 0.437 / 327) and how == "binomial over 327 examples"
    se, how = binomial_stderr(_results(0.563, 327), "validation.subsets.math")
    assert se == math.sqrt(0.25 / 40) and how == "binomial over 40 examples"
    assert binomial_stderr({"validation": {"diagnostics": {"margin": 3.2}}}, "validation.diagnostics.margin") is None
    assert binomial_stderr({"validation": {"overall": 1.7, "num_examples": 9}}, "validation.overall") is None


def test_the_issue_case_is_within_noise_and_a_far_trial_is_not():
    from rmspec.sweep.noise import within_noise

    def se(p: float, n: int = 327) -> float:
        return math.sqrt(p * (1 - p) / n)

    best = {"number": 2, "objective": 0.590, "stderr": se(0.590)}
    others = [
        best,
        {"number": 0, "objective": 0.563, "stderr": se(0.563)},  # 0.027 apart; 2 x hypot(0.0272, 0.0274) = 0.077
        {"number": 1, "objective": 0.400, "stderr": se(0.400)},  # 0.19 apart
        {"number": 3, "objective": None, "stderr": None},  # pruned
    ]
    assert within_noise(best, others) == [0]
    assert within_noise({**best, "stderr": None}, others) is None  # unknown, not "told apart"


def test_report_shows_standard_errors_noise_and_the_few_trials_caveat(tmp_path):
    from rmspec.sweep.layout import SweepDir
    from rmspec.sweep.outputs import noise_summary
    from rmspec.sweep.report import write_report

    se = [math.sqrt(p * (1 - p) / 327) for p in (0.563, 0.590, 0.571)]
    trials = [
        {"number": i, "state": "complete", "params": {"lr": lr}, "objective": p, "stderr": s, "stderr_source": "b"}
        for i, (lr, p, s) in enumerate(zip((1e-4, 2e-4, 3e-4), (0.563, 0.590, 0.571), se, strict=True))
    ]
    record = {
        "study_name": "qs",
        "objective": "validation.overall",
        "direction": "maximize",
        "trials": trials,
        "best": trials[1],
        "noise": noise_summary(trials[1], trials),
        "importances": {"lr": 1.0},
    }
    assert record["noise"] == {"completed": 3, "within_noise_of_best": [0, 2], "z": 2.0, "few_trials": True}
    write_report(SweepDir(tmp_path), record)
    html = (tmp_path / "report.html").read_text()
    assert f"0.59 ± {se[1]:.4g}" in html
    assert "trials 0, 2 are within 2 standard errors of the best; the sweep does not tell them apart" in html
    assert "From 3 completed trials only:" in html
    record["noise"] = noise_summary(trials[1], [trials[1], {**trials[0], "objective": 0.30}])
    write_report(SweepDir(tmp_path), record)
    assert (
        "yes: every other completed trial is more than 2 standard errors away" in (tmp_path / "report.html").read_text()
    )
