"""VL-RewardBench (MMInstruction/VL-RewardBench): one image, a query, two responses ranked by humans.

Official rule, read from github vl-rewardbench/VL_RewardBench `cal.py` (get_dataset_from_id,
distribution_dataset): the source set comes from the id's prefix, the text before its first `_` or
`-` (`RLAIF` rlaif-v, `RLHF` rlhf-v, `mathverse` / `mmmu` reasoning_tasks, `wildvision`
wildvision-battle, `hallucination` povid, anything else vlfeedback); the sets form three groups,
general (vlfeedback, wildvision-battle), hallucination (povid, rlhf-v, rlaif-v) and reasoning
(reasoning_tasks). Reported: each group's accuracy, the overall accuracy (all right / all judged)
and the macro average of the three groups. An item counts once (cal.py keys it by id, query and
the sorted responses). `human_ranking` gives each response's rank, 0 the preferred one (the
inference script counts the response ranked 1 as the rejected one); a reward model is right when
the preferred response scores strictly higher.

The prompt is built as the official `inference_hf.py` builds it: every `<image>\n` in the query is
removed (`question.replace("<image>\n", "")`; 448 of the 1,250 released queries, from the
hallucination sets, start with that placeholder), then one user turn holds the text first and the
picture after it, as both official scripts send them (rmspec.evaluate.image_prompts.image_prompt).
No other text is changed: a `<image>` the query still holds after that is text.

Files: the hub's test split (an `image` column, bytes), or a JSON Lines file of the same rows with
`image_path` (relative to the file's folder, images downloaded separately). Per-example rows: id,
subset (the source set), group, score_chosen, score_rejected, len_chosen, len_rejected.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.figures import BenchmarkScore, mean, pair_correct
from rmspec.evaluate.image_prompts import image_prompt
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import Example

GROUPS = {
    "vlfeedback": "general",
    "wildvision-battle": "general",
    "povid": "hallucination",
    "rlhf-v": "hallucination",
    "rlaif-v": "hallucination",
    "reasoning_tasks": "reasoning",
}
GROUP_ORDER = ("general", "hallucination", "reasoning")
# The image placeholder the released queries carry and inference_hf.py removes before it builds the message.
QUERY_PLACEHOLDER = "<image>\n"


def official_query(query: str) -> str:
    """The query's text as the official inference script sends it: every `<image>\n` removed."""
    return query.replace(QUERY_PLACEHOLDER, "")


def id_prefix(example_id: str) -> str:
    """The id up to its first `_` or `-` (the whole id when it has neither), as cal.py cuts it."""
    cuts = [i for i in (example_id.find("_"), example_id.find("-")) if i != -1]
    return example_id[: min(cuts)] if cuts else example_id


def source_set(example_id: str) -> str:
    prefix = id_prefix(example_id)
    if prefix == "RLAIF":
        return "rlaif-v"
    if prefix == "RLHF":
        return "rlhf-v"
    if prefix in ("mathverse", "mmmu"):
        return "reasoning_tasks"
    if prefix == "wildvision":
        return "wildvision-battle"
    if prefix == "hallucination":
        return "povid"
    return "vlfeedback"


def score_vl_rewardbench(subsets: Sequence[str], chosen: Sequence[float], rejected: Sequence[float]) -> BenchmarkScore:
    """Overall accuracy, per group and per source set, and the macro average of the three groups."""
    hits: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for subset, c, r in zip(subsets, chosen, rejected, strict=True):
        counts[subset] += 1
        hits[subset] += pair_correct(c, r)
    group_hits: dict[str, int] = defaultdict(int)
    group_counts: dict[str, int] = defaultdict(int)
    for subset, n in counts.items():
        group_hits[GROUPS[subset]] += hits[subset]
        group_counts[GROUPS[subset]] += n
    groups = {g: group_hits[g] / group_counts[g] for g in GROUP_ORDER if group_counts[g]}
    notes = []
    missing = [g for g in GROUP_ORDER if g not in groups]
    if missing:
        notes.append(f"group(s) absent here: {', '.join(missing)}; the macro average is the mean of those present")
    overall = sum(group_hits.values()) / sum(group_counts.values()) if counts else 0.0
    details = {"overall_accuracy": overall, "macro_average": mean(list(groups.values()))}
    return BenchmarkScore(
        "vl_rewardbench", overall, groups, {s: hits[s] / counts[s] for s in counts}, dict(counts), details, notes
    )


def preferred_order(ranking: Any, where: str) -> tuple[int, int]:
    """(index of the preferred response, index of the other) from `human_ranking`."""
    if not isinstance(ranking, (list, tuple)) or sorted(int(r) for r in ranking) != [0, 1]:
        raise DataError(
            f"{where}: human_ranking must rank two responses as [0, 1] or [1, 0], got {ranking!r}",
            "use the benchmark's released file (MMInstruction/VL-RewardBench, or the repository's data.jsonl)",
        )
    ranks = [int(r) for r in ranking]
    return ranks.index(0), ranks.index(1)


class VLRewardBench(BenchmarkKind):
    name = "vl_rewardbench"
    columns = ("id", "query", "response", "human_ranking")

    def examples(self, rows: list[dict[str, Any]], source: str) -> list[Example]:
        folder = Path(source).parent if Path(source).is_file() else None
        seen: set[str] = set()
        out: list[Example] = []
        for index, row in enumerate(rows):
            where = f"benchmark 'vl_rewardbench': {source} row {index} (id {row.get('id')!r})"
            responses = row["response"]
            if not isinstance(responses, (list, tuple)) or len(responses) != 2:
                raise DataError(f"{where}: response must be a list of two responses", "use the released file")
            best, other = preferred_order(row["human_ranking"], where)
            query = row["query"]
            if not isinstance(query, str):
                raise DataError(f"{where}: query must be text, got {query!r}", "use the released file")
            image = row.get("image")
            if image is None:
                image = row.get("image_path")
            if image is None:
                raise DataError(f"{where}: no image (neither image nor image_path)", "use the released file")
            key = str(row["id"]) + query + "\t".join(sorted(str(r) for r in responses))
            if key in seen:  # cal.py counts an item once
                continue
            seen.add(key)
            example_id = str(row["id"])
            subset = source_set(example_id)
            out.append(
                Example(
                    example_id,
                    subset,
                    image_prompt(official_query(query), [image], folder, where),
                    [str(responses[best]), str(responses[other])],
                )
            )
        return out

    def score_fields(self, example: Example, scores: list[float], lengths: list[int]) -> dict[str, Any]:
        return {**super().score_fields(example, scores, lengths), "group": GROUPS[source_set(example.id)]}

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        return score_vl_rewardbench(
            [source_set(str(r["id"])) for r in rows],
            [float(r["score_chosen"]) for r in rows],
            [float(r["score_rejected"]) for r in rows],
        )


KIND = VLRewardBench()
