"""The benchmark catalogue: every benchmark kind rmspec knows, registered here and only here.

Light (no torch, no datasets): the spec's `eval.benchmarks[].kind` choices, `rmspec eval
--benchmark` and the judge's list of pairwise kinds read this table. Each entry names the
module that implements the kind (loading, per-example rows, the official scoring rule, the
pairs the diagnostics read, what the report adds); `rmspec.evaluate.registry` imports that
module when the kind is first used.

Adding a benchmark: one module under rmspec/evaluate/kinds/ (a `KIND` object, see
rmspec.evaluate.kinds.base) and one line in CATALOGUE below.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath


class ScoredAs(str, Enum):
    """How a model's benchmark rows are scored: what evaluation reads, whatever the scorer kind.
    Each scorer kind says which it is (rmspec.inference.scorers: a pointwise model and a composite
    are read as rewards); results.json's entries carry it as `scorer`."""

    REWARD = "reward"  # one score per response: pairs, best-of-N
    JUDGE = "judge"  # a generative judge's verdicts on a pair, in both orders
    PROCESS = "process"  # a score per step

    __str__ = str.__str__

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# Which models a kind can score: a reward model (one score per response), a generative judge
# (verdicts on a pair, both orders), a process reward model (a score per step).
REWARD, JUDGE, PROCESS = ScoredAs.REWARD, ScoredAs.JUDGE, ScoredAs.PROCESS


@dataclass(frozen=True)
class BenchmarkInfo:
    name: str
    hub: str | None  # the official hub id; None: a local file is required
    split: str | None  # the official split; None: all of the kind's splits (its module says which)
    scorers: tuple[ScoredAs, ...]  # REWARD / JUDGE / PROCESS: the models this kind can score
    module: str  # the module holding the kind's KIND object
    description: str
    # (extra, what for) of the optional package its scoring imports (rmspec.extras checks it before an
    # eval starts); None: the base install scores it.
    needs: tuple[str, str] | None = None
    # named by its file's stem in results.json (any preference file: the demo's benchmark and a control of
    # it read apart); False: by the kind, an official benchmark whatever file holds it
    named_by_file: bool = False


def _kind(
    name: str,
    hub: str | None,
    split: str | None,
    scorers: tuple[ScoredAs, ...],
    description: str,
    needs: tuple[str, str] | None = None,
    named_by_file: bool = False,
) -> BenchmarkInfo:
    return BenchmarkInfo(name, hub, split, scorers, f"rmspec.evaluate.kinds.{name}", description, needs, named_by_file)


# The order is the order of the spec's choices and of `rmspec eval --help`.
CATALOGUE: dict[str, BenchmarkInfo] = {
    info.name: info
    for info in (
        _kind(
            "rewardbench",
            "allenai/reward-bench",
            "filtered",
            (REWARD, JUDGE),
            "RewardBench v1: sections Chat, Chat Hard, Safety, Reasoning",
        ),
        _kind(
            "rewardbench2",
            "allenai/reward-bench-2",
            "test",
            (REWARD,),
            "RewardBench 2: best-of-4 per prompt, Ties by its own formula",
        ),
        _kind(
            "rm_bench",
            "THU-KEG/RM-Bench",
            "train",
            (REWARD,),
            "RM-Bench: 3 chosen x 3 rejected styles, hard/normal/easy",
        ),
        _kind(
            "judgebench", "ScalerLab/JudgeBench", "gpt", (REWARD, JUDGE), "JudgeBench: pairs with an A>B / B>A label"
        ),
        _kind(
            "pairs",
            None,
            "train",
            (REWARD, JUDGE),
            "any preference file (a data preset maps it): pair accuracy",
            named_by_file=True,
        ),
        _kind(
            "processbench",
            "Qwen/ProcessBench",
            None,
            (PROCESS,),
            "ProcessBench: the first wrong step of a solution",
            needs=("process", "step AUROC"),
        ),
        _kind("rmb", None, None, (REWARD,), "RMB: pairwise and best-of-N, helpfulness and harmlessness"),
        _kind(
            "prmbench",
            "hitsmy/PRMBench_Preview",
            "train",
            (PROCESS,),
            "PRMBench: every step valid or not, PRMScore",
            needs=("process", "step AUROC"),
        ),
        _kind(
            "vl_rewardbench",
            "MMInstruction/VL-RewardBench",
            "test",
            (REWARD,),
            "VL-RewardBench: image pairs, general / hallucination / reasoning and their macro average",
        ),
        _kind(
            "multimodal_rewardbench",
            None,
            None,
            (REWARD,),
            "Multimodal RewardBench: image pairs, accuracy per category (data/all_data.json)",
        ),
        _kind(
            "long_rewardbench",
            "LCM-Lab/LongRewardBench",
            None,
            (REWARD,),
            "Long-RewardBench: 4k-128k-token contexts, pairwise and best-of-N, per task and per length",
        ),
    )
}


def result_name(kind: str, path: str | None, taken: set[str], name: str | None = None) -> str:
    """The name results.json gives a benchmark (its entry, RUN/eval/NAME.jsonl, the report's tables, a
    sweep's `benchmarks.NAME.overall`), added to ``taken``: the spec's `name:`; else the stem of the file
    for a kind named by its file (pairs: any preference file), so the demo's benchmark and a control of it
    read apart; else the kind. A second one of a kind without a name: KIND-STEM; still
    taken: -2, -3, ... (`rmspec validate` refuses a `name:` that repeats another's)."""
    stem = PurePath(path).stem if path else None
    info = CATALOGUE.get(kind)
    chosen = name or (stem if stem and info is not None and info.named_by_file else kind)
    if chosen in taken and not name and stem and chosen == kind:
        chosen = f"{kind}-{stem}"
    base, n = chosen, 2
    while chosen in taken:
        chosen, n = f"{base}-{n}", n + 1
    taken.add(chosen)
    return chosen


def kind_names() -> tuple[str, ...]:
    return tuple(CATALOGUE)


def kinds_scored_by(scorer: str) -> tuple[str, ...]:
    return tuple(name for name, info in CATALOGUE.items() if scorer in info.scorers)
