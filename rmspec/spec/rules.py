"""Cross-field rules: checks that span sections. Each yields (path, message, hint); none changes a value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

from rmspec.spec import presets
from rmspec.spec.approach_rules import ENCODER_HINTS, mappings
from rmspec.spec.base import Problem
from rmspec.spec.benchmarks import result_name
from rmspec.spec.data_filters import Filter
from rmspec.spec.image_rules import images_need_an_approach_that_reads_them
from rmspec.spec.root import Spec
from rmspec.spec.row_kinds import PAIRS, RowKind, describe
from rmspec.spec.training_rules import best_checkpoint_rules, optimizer_needs_cuda

__all__ = ["ENCODER_HINTS", "LIST_PRESETS", "PAIR_PRESETS", "PROCESS_PRESETS", "SCORE_PRESETS", "check"]


# The presets by the rows they give (rmspec.spec.presets is their table; tests and docs read these).
PAIR_PRESETS = presets.giving(RowKind.PAIRS)
LIST_PRESETS = presets.giving(RowKind.LIST)
SCORE_PRESETS = presets.giving(RowKind.SCORED)
PROCESS_PRESETS = presets.giving(RowKind.STEPS)
# What each filter reads: a spec that gives an approach rows it does not train on, or a filter for
# other rows, is refused here rather than at the data stage.
FILTER_KINDS = [get_args(c.model_fields["kind"].annotation)[0] for c in get_args(get_args(Filter)[0])]
FILTER_ROWS = {"drop_identical": (PAIRS,), "min_score_gap": (PAIRS,)}  # other filters read any rows


def approach_rules(spec: Spec) -> Iterator[Problem]:
    """The approach's own rules (its section's `problems`), then a preset that gives it rows it does not
    train on, where its own rules said nothing about that dataset."""
    own = list(spec.approach.problems(spec))
    yield from own
    rows, kind = spec.approach.row_kind, spec.approach.kind
    for path, mapping in mappings(spec):
        given = presets.mismatch(mapping, rows)
        if given is None or any(p[: len(path)] == path for p, _, _ in own):
            continue
        yield (
            (*path, "preset"),
            f"the {mapping.preset} preset gives {describe(given)}, which approach {kind} does not train on "
            f"(it trains on {describe(rows)})",
            f"presets approach {kind} can use: {', '.join(presets.usable(rows)) or 'none: map the columns'}",
        )


def filters_read_the_rows(spec: Spec) -> Iterator[Problem]:
    """A filter for other rows (drop_identical on lists) stops the data stage: say so at validate."""
    rows, kind = spec.approach.row_kind, spec.approach.kind
    usable = sorted(
        {*FILTER_KINDS} - {name for name, shapes in FILTER_ROWS.items() if rows not in shapes},
        key=FILTER_KINDS.index,
    )
    lists: list[tuple[tuple, Any]] = [(("data", "filters"), spec.data.filters)]
    lists += [(("data", "sources", i, "filters"), e.filters) for i, e in enumerate(spec.data.sources or [])]
    for path, filters in lists:
        for i, f in enumerate(filters):
            if rows not in FILTER_ROWS.get(f.kind, (rows,)):
                yield (
                    (*path, i, "kind"),
                    f"filter {f.kind} reads {describe(FILTER_ROWS[f.kind][0])}; approach {kind} trains on "
                    f"{describe(rows)}",
                    f"remove it; filters approach {kind} can use: {', '.join(usable)}",
                )
    if spec.data.augment and rows != PAIRS:
        yield (
            ("data", "augment"),
            f"data.augment makes preference pairs; approach {kind} trains on {describe(rows)}",
            "remove data.augment, or train on pairs (approach kind: bradley_terry)",
        )


def margin_must_be_used(spec: Spec) -> Iterator[Problem]:
    uses = spec.approach.margin_mode != "none"
    for path, mapping in mappings(spec):
        margin_col = mapping.columns.margin
        if margin_col and not uses:
            yield (
                (*path, "columns", "margin"),
                f"a margin column ({margin_col!r}) is mapped, but the loss ignores it",
                "set approach.margin: subtract (or scale), or remove the margin mapping",
            )


def batch_divides(spec: Spec) -> Iterator[Problem]:
    """The global batch splits evenly over the replicas that take it: the processes, or with an explicit
    hardware.context_parallel: N the groups of N processes, whose ranks share their rows (auto is checked
    per process here; the plan checks the groups it chooses)."""
    hw, tr = spec.hardware, spec.training
    procs = hw.gpus_per_node * hw.nodes
    cp = hw.context_parallel if isinstance(hw.context_parallel, int) and procs % hw.context_parallel == 0 else 1
    replicas = procs // cp
    what = f"{procs} processes ({hw.nodes} node(s) x {hw.gpus_per_node})"
    if cp > 1:
        what = f"{replicas} context-parallel groups ({procs} processes, {cp} per group)"
    if tr.global_batch_size % replicas:
        yield (
            ("training", "global_batch_size"),
            f"{tr.global_batch_size} pairs cannot be split evenly over {what}",
            f"use a multiple of {replicas}, e.g. {replicas * max(1, round(tr.global_batch_size / replicas))}",
        )
    elif tr.micro_batch_size != "auto" and tr.global_batch_size % (tr.micro_batch_size * replicas):
        yield (
            ("training", "micro_batch_size"),
            f"global batch {tr.global_batch_size} is not a multiple of micro batch {tr.micro_batch_size} x {what}",
            f"pick a micro batch that divides global_batch_size / {replicas}, or micro_batch_size: auto",
        )


def early_stopping_needs_eval(spec: Spec) -> Iterator[Problem]:
    if spec.training.early_stopping is None:
        return
    split = spec.data.split
    if split.validation_fraction is None and split.validation_source is None:
        yield (
            ("training", "early_stopping"),
            "early stopping needs a validation split",
            "set data.split.validation_fraction",
        )
    if spec.training.eval_steps is None:
        yield (("training", "early_stopping"), "early stopping needs periodic evaluation", "set training.eval_steps")


def split_has_one_way(spec: Spec) -> Iterator[Problem]:
    split = spec.data.split
    if split.validation_fraction is not None and split.validation_source is not None:
        yield (
            ("data", "split"),
            "both validation_fraction and validation_source are set",
            "keep one: delete validation_fraction to validate on validation_source (a validation_source alone "
            "turns the fraction off), or delete validation_source to hold out a fraction",
        )


def hub_push_needs_repo(spec: Spec) -> Iterator[Problem]:
    if spec.output.push_to_hub and not spec.output.hub_repo_id:
        yield (
            ("output", "hub_repo_id"),
            "push_to_hub is on but no hub_repo_id is given",
            "set output.hub_repo_id: org/name",
        )


def lora_precision(spec: Spec) -> Iterator[Problem]:
    if spec.model.lora is not None and spec.model.dtype == "float16" and spec.hardware.device == "cpu":
        yield (("model", "dtype"), "float16 training is not supported on CPU", "use dtype: auto or float32")


def benchmark_names_unique(spec: Spec) -> Iterator[Problem]:
    """A benchmark's `name:` that another benchmark also has (its own, or the one it is given by default)
    would leave one of them under a name the spec did not write (rmspec.spec.benchmarks.result_name)."""
    benchmarks = spec.eval.benchmarks
    names = [b.name or result_name(b.kind, b.path, set()) for b in benchmarks]
    for i, bench in enumerate(benchmarks):
        others = [j for j, other in enumerate(names) if other == bench.name and j != i]
        if bench.name and others:
            yield (
                ("eval", "benchmarks", i, "name"),
                f"the name {bench.name!r} is also the name of eval.benchmarks.{others[0]}",
                "give each benchmark its own name: (results.json, RUN/eval/NAME.jsonl and the report name them by it)",
            )


RULES = (
    approach_rules,
    benchmark_names_unique,
    images_need_an_approach_that_reads_them,
    filters_read_the_rows,
    margin_must_be_used,
    batch_divides,
    early_stopping_needs_eval,
    split_has_one_way,
    hub_push_needs_repo,
    lora_precision,
    best_checkpoint_rules,
    optimizer_needs_cuda,
)


def check(spec: Spec) -> list[Problem]:
    from rmspec.spec.option_rules import OPTION_RULES
    from rmspec.spec.sweep_rules import sweep_problems

    problems = [problem for rule in (*RULES, *OPTION_RULES) for problem in rule(spec)]
    return problems + list(sweep_problems(spec, check))
