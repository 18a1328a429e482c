"""Cross-field rules for options whose value must match what another section produces: the
early-stopping metric (only names the approach's validation logs), the score that augment
pairs_from_scores reads, Liger's GPU kernels and the one host-memory figure of a CPU spec. Each
yields (path, message, hint) like rmspec.spec.rules."""

from __future__ import annotations

from collections.abc import Iterator

from rmspec.spec import presets
from rmspec.spec.approach_rules import mappings
from rmspec.spec.base import Problem
from rmspec.spec.root import Spec
from rmspec.spec.row_kinds import PAIRS, describe


def early_stopping_metric_exists(spec: Spec) -> Iterator[Problem]:
    stopping = spec.training.early_stopping
    produced = type(spec.approach).logged_metrics  # None: the approach did not say; not checked
    if stopping is None or produced is None or stopping.metric in produced:
        return
    first = produced[0]
    mode = "min" if first.endswith("loss") else "max"
    yield (
        ("training", "early_stopping", "metric"),
        f"early stopping watches {stopping.metric!r}, which approach {spec.approach.kind}'s validation never logs "
        f"(it logs: {', '.join(produced)})",
        f"write training.early_stopping: {{metric: {first}, mode: {mode}}}"
        + (" (losses: mode min)" if len(produced) > 1 else ""),
    )


def pairs_from_scores_reads_a_score(spec: Spec) -> Iterator[Problem]:
    pair_by = spec.data.mapping.pair_by
    for i, aug in enumerate(spec.data.augment):
        if aug.kind != "pairs_from_scores" or aug.attribute in (None, "score", pair_by):
            continue
        yield (
            ("data", "augment", i, "attribute"),
            f"pairs_from_scores orders responses by each pair's score_chosen/score_rejected"
            f"{f' (helpsteer2: by pair_by {pair_by})' if pair_by else ''}; there is no score {aug.attribute!r}",
            "leave out attribute and map data.mapping.columns.score_chosen and score_rejected to the score columns"
            + (f", or write attribute: {pair_by}" if pair_by else ""),
        )


def report_formats_have_effects(spec: Spec) -> Iterator[Problem]:
    if "json" in spec.output.report:
        yield (
            ("output", "report"),
            "results.json is always written (rmspec report, rmspec eval and report.html read it): json in "
            "output.report changes nothing",
            f"write output.report: [{', '.join(f for f in spec.output.report if f != 'json')}]",
        )


def liger_needs_a_gpu(spec: Spec) -> Iterator[Problem]:
    if spec.training.liger_kernel == "on" and spec.hardware.device == "cpu":
        yield (
            ("training", "liger_kernel"),
            "Liger's kernels are Triton GPU kernels; this spec trains on CPU",
            "write training.liger_kernel: auto (off on CPU) or off, or train on a GPU (hardware.device)",
        )


def one_host_memory_on_cpu(spec: Spec) -> Iterator[Problem]:
    hw = spec.hardware
    if hw.device == "cpu" and hw.memory_gb is not None and hw.cpu_memory_gb is not None:
        yield (
            ("hardware", "memory_gb"),
            f"on device cpu the device memory is the host RAM, which hardware.cpu_memory_gb ({hw.cpu_memory_gb:g}) "
            f"already gives: memory_gb ({hw.memory_gb:g}) would be ignored",
            "delete hardware.memory_gb (cpu_memory_gb is the host RAM per node)",
        )


def chat_template_is_used(spec: Spec) -> Iterator[Problem]:
    if spec.model.chat_template is not None and spec.data.mapping.chat_template == "plain":
        yield (
            ("model", "chat_template"),
            "model.chat_template is never used: data.mapping.chat_template is plain (the User:/Assistant: layout)",
            "delete data.mapping.chat_template (auto uses the template) or delete model.chat_template",
        )


def binarize_is_read(spec: Spec) -> Iterator[Problem]:
    """data.mapping.binarize, where written, is read by UltraFeedback's completions or a rejected list of answers
    made into pairs (rmspec.data.rejected_list); other rows never read it."""
    rows = spec.approach.row_kind
    for path, mapping in mappings(spec):
        layout = presets.get(mapping.preset)
        if "binarize" not in mapping.model_fields_set or rows == PAIRS or (layout and layout.ranked_from):
            continue
        listed = (
            " (the chosen answer first, the rejected ones tied below it)"
            if mapping.ranks_chosen_over_rejected()
            else ""
        )
        yield (
            (*path, "binarize"),
            f"binarize makes pairs of UltraFeedback's completions or of a rejected list; approach "
            f"{spec.approach.kind} trains on {describe(rows)}{listed}, which never read it",
            "delete data.mapping.binarize",
        )


OPTION_RULES = (
    early_stopping_metric_exists,
    pairs_from_scores_reads_a_score,
    report_formats_have_effects,
    liger_needs_a_gpu,
    one_host_memory_on_cpu,
    chat_template_is_used,
    binarize_is_read,
)
