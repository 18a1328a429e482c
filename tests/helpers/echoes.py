"""What an artifact only repeats from the spec, removed before the field walker compares it: a field
must change what rmspec decided or did, not the copy of itself that an artifact carries."""

from __future__ import annotations

from typing import Any


def plan_without_echoes(plan: dict) -> dict:
    """plan.json less what only repeats the spec (its hash, the --set list, the model's name, shape and LoRA
    settings, the hardware section): a field must change what the plan decided, not its echo."""
    out = {k: v for k, v in plan.items() if k not in ("spec_hash", "sets", "hardware")}
    out["model"] = {k: v for k, v in plan["model"].items() if k.endswith("parameters")}
    return out


def model_config_without_echoes(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """A saved model's config.json less its `rmspec` block (the spec's approach settings copied in for the
    scorer) and the name of the benchmark entry its reward statistics come from: what is left is what the run
    made (architecture, labels, the statistics themselves)."""
    if config is None:
        return None
    return {k: v for k, v in config.items() if k not in ("rmspec", "reward_stats_source")}


DATA_NOISE = ("seconds", "cached", "fingerprint")  # time and the config hash, not what a field changed
REPORT_ECHOES = ("approach", "max_length")  # copied from the spec into data_report.json
MIXTURE_ECHOES = ("stopping_strategy", "seed", "weights", "rows_asked")  # data.sources' settings, as written


def data_report_without_echoes(report: dict[str, Any]) -> dict[str, Any]:
    """data_report.json less the clock, its cache key and what it copies from the spec (the approach, the
    maximum length, the augmentations' kinds, a mixture's settings and each dataset's weight): left are the counts, lengths and notes
    the data stage found."""
    out = {k: v for k, v in report.items() if k not in DATA_NOISE and k not in REPORT_ECHOES}
    if "augmented" in out:  # rows made per augmentation, keyed by the kind the spec names: the counts only
        out["augmented"] = sorted(out["augmented"].values())
    if out.get("mixture"):
        out["mixture"] = {k: v for k, v in out["mixture"].items() if k not in MIXTURE_ECHOES}
    out["sources"] = {
        name: {k: v for k, v in counts.items() if k != "weight"} for name, counts in (out.get("sources") or {}).items()
    }
    return out


BENCHMARK_ECHOES = ("kind", "name", "source", "split", "per_example_path")  # the spec's entry, as written


def results_without_echoes(results: dict[str, Any] | None) -> dict[str, Any] | None:
    """results.json less what names the spec's benchmark entries (their kind, name, path and split, the
    per-example file named after them, the reward statistics' source name, a process model's threshold as
    the spec gave it): left are the figures (and a tuned threshold), in the spec's order."""
    if results is None:
        return None
    out = dict(results)
    out["benchmarks"] = [
        {k: v for k, v in entry.items() if k not in BENCHMARK_ECHOES}
        for entry in (results.get("benchmarks") or {}).values()
    ]
    threshold = out.get("threshold")
    if isinstance(threshold, dict) and threshold.get("source") == "approach.threshold":  # the spec's value
        out["threshold"] = {k: v for k, v in threshold.items() if k not in ("value", "source")}
    if isinstance(out.get("reward_stats"), dict):
        out["reward_stats"] = {k: v for k, v in out["reward_stats"].items() if k != "source"}
    return out
