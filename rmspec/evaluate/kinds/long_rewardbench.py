"""Long-RewardBench (Tang et al. 2025, "LongRM: Revealing and Unlocking the Context Boundary of Reward
Modeling", arXiv 2510.06915; code github.com/LCM-Lab/Long-RM, data hub LCM-Lab/LongRewardBench,
Apache-2.0): reward models judged on contexts of 4k to 128k tokens, pairwise and best-of-N.

Data as released: one JSON Lines file per task, the task being the file's name (`LongQA.jsonl`,
`Summ.jsonl`, `Safety.jsonl`, `ICL.jsonl`, `Cite.jsonl`, `Code.jsonl`, `Math.jsonl`; 1,900 rows). A
row holds `prompt_template` (the messages before the answer: the long context and the question),
`tasktype` (`PairWise` or `BestOfN`), `subtype` (pairwise: `same` or another value; best-of-N: the
rank group 2/3/4), `ctx_length_for_length` (`4k` ... `128k`), and the answers: `chosen` and `rejected`
(PairWise), or `candidates` best first (BestOfN); besides them `id`, `question`, `source`, `subtask`,
`task`, models, `length`, `words_count`, `candidates_score`, which the scoring does not read.

The official rule for a scalar (discriminative) reward model, read in the repository at bbc90f5
(`evaluate/evaluating/longreward_bench/preprocess.py` LongRewardBenchDisRMPreprocess,
`utils/prompt.py` extract_judgement with is_disrm, `evaluator.py` evaluate):
- per task file: `random.seed(42)`; rows whose tasktype is neither PairWise nor BestOfN (and not
  empty) are dropped; the rows are shuffled; then, row by row in that shuffled order, the answers'
  order is shuffled (`[chosen, rejected]` or the candidates): the model scores the answers in that
  presented order, each as `prompt_template` plus one assistant turn;
- the scores are ranked by a stable sort, highest first, so a tie goes to the answer presented first;
- the row's result is the fraction of answers whose rank equals their true rank (a pair gives 0 or 1);
- figures are micro means of the results: per task and per length bucket over the PairWise rows,
  `Same.` / `Diff.` by subtype, `PairWise Avg.`, `Rank2`-`Rank4` by subtype and `Rank Avg,` over the
  BestOfN rows, and `AVG.` over every row (the headline); an empty group reads 0 in its results.csv.

rmspec replays the same random shuffles (the presentation order depends only on the file's row
count and the answers' counts), so its figures, ties included, are the official ones. Here the
headline is AVG.; the sections are the per-length figures; the subsets are the tasks (PairWise rows)
and Rank2/3/4 (BestOfN rows); `details.official` is the results.csv table. Per-example rows: `id`,
`subset` (the task), `tasktype`, `subtype`, `ctx_length`, `scores` (true order, best first),
`shuffled_order` and `output` (the presented order and its scores, the official result file's
fields), `result`, lengths; PairWise rows also `score_chosen` / `score_rejected`.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.figures import BenchmarkScore, Pair
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.kinds.records import Fields, Record, read_records
from rmspec.evaluate.loading import BenchmarkData, Example, resolve_source

NAME = "long_rewardbench"
TASKS = ("LongQA", "Summ", "Safety", "ICL", "Cite", "Code", "Math")  # the official order (evaluator.py)
PAIRWISE, BEST_OF_N = "PairWise", "BestOfN"
LENGTHS = ("4k", "8k", "16k", "32k", "64k", "128k")
RANKS = ("2", "3", "4")
SEED = 42
HINT = (
    "Long-RewardBench as released: a folder of task files (LongQA.jsonl, Summ.jsonl, Safety.jsonl, ICL.jsonl, "
    "Cite.jsonl, Code.jsonl, Math.jsonl) or one of them; each row a JSON object with prompt_template, tasktype "
    "(PairWise with chosen and rejected, or BestOfN with candidates best first), subtype, ctx_length_for_length"
)
DOWNLOAD = (
    "download it (hf download LCM-Lab/LongRewardBench --repo-type dataset --local-dir "
    "LongRewardBench) and give the folder as path: (spec) or --benchmark long_rewardbench=FOLDER (rmspec eval)"
)


# ----------------------------------------------------------------- the official rule


def presentation_orders(sizes: Sequence[int], seed: int = SEED) -> list[list[int]]:
    """The order each row's answers are shown in, as the official preprocessing draws it for one task
    file: seed, shuffle the rows, then shuffle each row's answer indices in the shuffled row order.
    sizes: the number of answers of each kept row, in file order. order[j] is the answer shown j-th."""
    rng = random.Random(seed)
    visit = list(range(len(sizes)))
    rng.shuffle(visit)  # random.shuffle(dataset): only the length matters
    orders: list[list[int]] = [[] for _ in sizes]
    for i in visit:
        order = list(range(sizes[i]))
        rng.shuffle(order)
        orders[i] = order
    return orders


def predicted_ranks(presented_scores: Sequence[float]) -> list[int]:
    """extract_judgement(is_disrm=True): the rank of each presented answer, 0 the best, by a stable sort
    (a tie ranks the answer presented first higher)."""
    by_score = sorted(range(len(presented_scores)), key=lambda j: presented_scores[j], reverse=True)
    return [by_score.index(j) for j in range(len(presented_scores))]


def row_result(scores: Sequence[float], order: Sequence[int]) -> float:
    """compare_shuffled: the fraction of answers ranked at their true rank. scores in true order (best
    first), order the presented order (order[j]: the true index of the answer shown j-th)."""
    if sorted(order) != list(range(len(scores))) or not scores:
        raise ValueError(f"shuffled_order {list(order)} is not an order of {len(scores)} answers")
    ranks = predicted_ranks([scores[i] for i in order])
    return sum(int(true == got) for true, got in zip(order, ranks)) / len(order)


def score_long_rewardbench(
    tasks: Sequence[str],
    tasktypes: Sequence[str],
    subtypes: Sequence[str],
    lengths: Sequence[str],
    results: Sequence[float],
) -> BenchmarkScore:
    """The figures of evaluator.py from each row's result (micro means)."""
    rows = list(zip(tasks, tasktypes, [str(s) for s in subtypes], [str(n) for n in lengths], results, strict=True))
    pair = [r for r in rows if r[1] == PAIRWISE]
    bon = [r for r in rows if r[1] == BEST_OF_N]

    def avg(group: list[tuple[str, str, str, str, float]]) -> float:
        return sum(r[4] for r in group) / max(len(group), 1)  # the official max(len, 1): empty reads 0

    by_task = {t: [r for r in pair if r[0] == t] for t in TASKS}
    by_rank = {k: [r for r in bon if r[2] == k] for k in RANKS}
    by_length = {n: [r for r in pair if r[3] == n] for n in LENGTHS}
    official: dict[str, float] = {t: avg(g) for t, g in by_task.items()}
    official["Same."] = avg([r for r in pair if r[2] == "same"])
    official["Diff."] = avg([r for r in pair if r[2] != "same"])
    official["PairWise Avg."] = avg(pair)
    official.update({f"Rank{k}": avg(g) for k, g in by_rank.items()})
    official["Rank Avg,"] = avg(bon)  # sic: the label results.csv writes
    official.update({n: avg(g) for n, g in by_length.items()})
    official["AVG."] = avg(rows)

    subsets = {t: avg(g) for t, g in by_task.items() if g}
    counts = {t: len(g) for t, g in by_task.items() if g}
    rank_groups: dict[str, list[tuple[str, str, str, str, float]]] = defaultdict(list)
    for r in bon:
        rank_groups[f"Rank{r[2]}"].append(r)
    subsets.update({k: avg(g) for k, g in sorted(rank_groups.items())})
    counts.update({k: len(g) for k, g in sorted(rank_groups.items())})
    notes = []
    absent = [t for t in TASKS if not by_task[t] and not any(r[0] == t for r in rows)]
    if absent and rows:
        notes.append(f"tasks absent here: {', '.join(absent)}; the figures are over the rows present")
    other_tasks = sorted({r[0] for r in pair} - set(TASKS))
    if other_tasks:
        notes.append(f"PairWise rows of {', '.join(other_tasks)} count in PairWise Avg. and AVG. but in no task column")
    unbucketed = sum(1 for r in pair if r[3] not in LENGTHS)
    if unbucketed:
        notes.append(f"{unbucketed} PairWise row(s) have a ctx_length_for_length outside {'/'.join(LENGTHS)}")
    odd_ranks = sorted(k for k in rank_groups if k.removeprefix("Rank") not in RANKS)
    if odd_ranks:
        notes.append(f"BestOfN subtypes outside 2/3/4 ({', '.join(odd_ranks)}) count in Rank Avg, and AVG. only")
    untyped = len(rows) - len(pair) - len(bon)
    if untyped:
        notes.append(f"{untyped} row(s) without a tasktype count in AVG. only")
    return BenchmarkScore(
        NAME,
        official["AVG."] if rows else float("nan"),
        {n: avg(g) for n, g in by_length.items() if g},
        subsets,
        counts,
        {
            "official": official,
            "pairwise": official["PairWise Avg."] if pair else None,
            "best_of_n": official["Rank Avg,"] if bon else None,
            "length_counts": {n: len(g) for n, g in by_length.items() if g},
        },
        notes,
    )


# ----------------------------------------------------------------- the files


def task_files(source: str) -> tuple[list[tuple[str, str]], list[str]]:
    """[(task, file)] in the official task order, and the folder's other JSON Lines files (ignored).
    A file must be named after its task: the task is the file's name in the release."""
    path = Path(source)
    if path.is_file():
        if path.stem not in TASKS:
            raise DataError(
                f"benchmark {NAME!r}: {source}: the file's name is not a task ({', '.join(TASKS)})",
                "name the file after its task, as released (LongQA.jsonl, ...): the task and the official "
                "shuffles come from the file",
            )
        return [(path.stem, str(path))], []
    found = [(t, str(path / f"{t}.jsonl")) for t in TASKS if (path / f"{t}.jsonl").is_file()]
    others = sorted(p.name for p in path.glob("*.jsonl") if p.stem not in TASKS)
    if not found:
        raise DataError(f"benchmark {NAME!r}: {source} holds none of the task files {', '.join(TASKS)}", HINT)
    return found, others


def _messages(fields: Fields) -> list[dict[str, str]]:
    turns = fields.get(
        "prompt_template", lambda v: isinstance(v, list) and bool(v), "a non-empty list of {role, content}"
    )
    out = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("content"), str) or not turn.get("role"):
            raise fields.fail(f"prompt_template[{i}]", "each message needs a role and a content string")
        out.append({"role": str(turn["role"]), "content": turn["content"]})
    return out


def _answers(fields: Fields, tasktype: str) -> list[str]:
    if tasktype == BEST_OF_N:
        candidates = fields.texts("candidates")
        if len(candidates) < 2:
            raise fields.fail("candidates", f"a best-of-N row needs at least 2 candidates, got {len(candidates)}")
        return candidates
    return [fields.text("chosen"), fields.text("rejected")]


def task_examples(task: str, records: list[Record]) -> list[Example]:
    """One Example per kept row, in file order, with the presented order the official run draws."""
    kept: list[tuple[Record, str, list[str]]] = []
    for record in records:
        fields = Fields(NAME, record, HINT)
        tasktype = fields.get(
            "tasktype", lambda v: v in (PAIRWISE, BEST_OF_N), f"{PAIRWISE!r} or {BEST_OF_N!r}"
        )  # the release has only these; the official filter would drop others silently
        kept.append((record, tasktype, _answers(fields, tasktype)))
    orders = presentation_orders([len(answers) for _, _, answers in kept])
    out = []
    for index, ((record, tasktype, answers), order) in enumerate(zip(kept, orders)):
        fields = Fields(NAME, record, HINT)
        length = fields.get("ctx_length_for_length", lambda v: isinstance(v, str) and bool(v), "a length such as '8k'")
        subtype = record.value.get("subtype")
        ident = record.value.get("id")
        out.append(
            Example(
                f"{task}-{ident if ident is not None else index}",
                task,
                _messages(fields),
                answers,
                {"tasktype": tasktype, "subtype": str(subtype), "ctx_length": length, "shuffled_order": order},
            )
        )
    return out


def _hub_folder(repo: str) -> str:
    """The released files of the hub copy (the official evaluator reads a local folder too)."""
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(repo, repo_type="dataset", allow_patterns=[f"{t}.jsonl" for t in TASKS]))
    except Exception as exc:  # offline, no such repository, no access
        raise DataError(f"benchmark {NAME!r}: cannot download {repo}: {exc}", DOWNLOAD) from None


def load_long_rewardbench(path: str | None, *, limit: int | None, base_dir: Any) -> BenchmarkData:
    source, local = resolve_source(NAME, path, base_dir)
    folder = source if local else _hub_folder(source)
    files, others = task_files(folder)
    examples: list[Example] = []
    for task, file in files:
        examples += task_examples(task, read_records(NAME, file, HINT))  # the shuffles need every row
    if limit is not None:
        examples = examples[:limit]
    if not examples:
        raise DataError(f"benchmark {NAME!r}: {source} has no rows", HINT)
    notes = [f"files other than the task files were not read: {', '.join(others)}"] if others else []
    return BenchmarkData(NAME, source, None, examples, notes)


class LongRewardBench(BenchmarkKind):
    name = NAME
    columns = ("prompt_template", "tasktype", "ctx_length_for_length")

    def load(
        self,
        path: str | None,
        *,
        split: str | None = None,
        preset: str | None = None,
        limit: int | None = None,
        base_dir: Any = None,
    ) -> BenchmarkData:
        if preset is not None:
            raise DataError(f"benchmark {NAME!r}: preset applies to kind 'pairs' only", "remove preset")
        return load_long_rewardbench(path, limit=limit, base_dir=base_dir)

    def local_files(self, source: str) -> list[str]:
        """The task files the check before the run reads (a DataError when there are none, or when a
        single file is not named for its task)."""
        return [file for _, file in task_files(source)[0]]

    def per_example_rows(self, data: BenchmarkData, scores: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
        rows = super().per_example_rows(data, scores)
        for row, example in zip(rows, data.examples):
            for key in ("tasktype", "subtype", "ctx_length"):
                row[key] = example.meta[key]
        return rows

    def score_fields(self, example: Example, scores: list[float], lengths: list[int]) -> dict[str, Any]:
        order = list(example.meta["shuffled_order"])
        fields: dict[str, Any] = {}
        if example.meta["tasktype"] == PAIRWISE:
            fields.update({"score_chosen": scores[0], "score_rejected": scores[1]})
        fields.update(
            {
                "scores": scores,
                "shuffled_order": order,
                "output": [scores[i] for i in order],
                "result": row_result(scores, order),
                "lengths": lengths,
            }
        )
        return fields

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        """Recomputed from the scores and the presented order, by the rule above."""
        return score_long_rewardbench(
            [str(r.get("subset") or "all") for r in rows],
            [str(r.get("tasktype") or "") for r in rows],
            [str(r.get("subtype")) for r in rows],
            [str(r.get("ctx_length")) for r in rows],
            [row_result([float(s) for s in r["scores"]], [int(i) for i in r["shuffled_order"]]) for r in rows],
        )

    def pairs(self, rows: Sequence[Mapping[str, Any]]) -> list[Pair]:
        """PairWise: chosen vs rejected; BestOfN: the best candidate against each other one."""
        out = []
        for row in rows:
            subset = str(row.get("subset") or "all")
            scores = [float(s) for s in row["scores"]]
            lengths = row.get("lengths") or [None] * len(scores)
            out += [Pair(subset, scores[0], scores[j], lengths[0], lengths[j]) for j in range(1, len(scores))]
        return out


KIND = LongRewardBench()
