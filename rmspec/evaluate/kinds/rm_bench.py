"""RM-Bench (THU-KEG/RM-Bench): 3 chosen x 3 rejected responses per prompt, in three styles.

Official rule, as the RM-Bench README's compute_accuracy: per domain the 3x3 matrix of
P(score(chosen style i) > score(rejected style j)); hard = upper triangle, normal = diagonal,
easy = lower triangle; a domain's score is their mean, the overall the mean of the domains.
Per-example rows: id, subset (the domain), score_chosen[3], score_rejected[3], lengths[6].

Files as released (github THU-KEG/RM-Bench `data/`, and the hub's THU-KEG/RM-Bench): `total_dataset.json`
gives each row its `domain`; the per-domain files (`chat_filtered.json`, `code_filtered.json`,
`math_filtered.json`, `safety-refuse_filtered.json`, `safety-response_filtered.json`) have no `domain`
column: the domain is the file's name, as the official scripts/utils.py scores such a file as one domain.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.evaluate.figures import BenchmarkScore, Pair, check_lengths, mean
from rmspec.evaluate.kinds.base import BenchmarkKind
from rmspec.evaluate.loading import Example, as_text_list

RM_BENCH_STYLES = ("concise", "detailed", "detailed-markdown")
# The two safety files (safety-refuse, safety-response) are one domain in the paper's table.
RM_BENCH_DOMAIN_ALIASES = {"safety-refuse": "safety", "safety-response": "safety"}
RM_BENCH_FILE_DOMAINS = ("chat", "code", "math", "safety-refuse", "safety-response")  # <domain>_filtered.json


def file_domain(source: str) -> str | None:
    """The domain a released per-domain file's name gives (`code_filtered.json` -> code), or None."""
    stem = Path(source).name.split(".")[0]
    name = stem[: -len("_filtered")] if stem.endswith("_filtered") else stem
    return name if name in RM_BENCH_FILE_DOMAINS else None


def rm_bench_matrix(chosen: Sequence[Sequence[float]], rejected: Sequence[Sequence[float]]) -> list[list[float]]:
    """M[i][j] = fraction of prompts with score(chosen[i]) > score(rejected[j]) (styles concise, detailed, markdown)."""
    check_lengths(chosen=chosen, rejected=rejected)
    size = len(RM_BENCH_STYLES)
    matrix = [[0.0] * size for _ in range(size)]
    for c, r in zip(chosen, rejected):
        if len(c) != size or len(r) != size:
            raise ValueError(
                f"RM-Bench needs {size} chosen and {size} rejected scores per prompt, got {len(c)} and {len(r)}"
            )
        for i in range(size):
            for j in range(size):
                matrix[i][j] += c[i] > r[j]
    n = len(chosen)
    return [[cell / n if n else 0.0 for cell in row] for row in matrix]


def rm_bench_levels(matrix: Sequence[Sequence[float]]) -> dict[str, float]:
    """hard = upper triangle (plain chosen vs fancier rejected), normal = diagonal, easy = lower triangle."""
    size = len(matrix)
    upper = [matrix[i][j] for i in range(size) for j in range(size) if i < j]
    lower = [matrix[i][j] for i in range(size) for j in range(size) if i > j]
    return {"hard": mean(upper), "normal": mean([matrix[i][i] for i in range(size)]), "easy": mean(lower)}


def score_rm_bench(
    domains: Sequence[str], chosen: Sequence[Sequence[float]], rejected: Sequence[Sequence[float]]
) -> BenchmarkScore:
    """Domain = mean(hard, normal, easy); overall = mean of domains; sections hard/normal/easy = domain means."""
    check_lengths(domains=domains, chosen=chosen, rejected=rejected)
    rows: dict[str, list[int]] = defaultdict(list)
    for i, domain in enumerate(domains):
        rows[RM_BENCH_DOMAIN_ALIASES.get(domain, domain)].append(i)
    subsets, matrices, levels = {}, {}, {}
    for domain, idx in rows.items():
        matrix = rm_bench_matrix([chosen[i] for i in idx], [rejected[i] for i in idx])
        matrices[domain] = matrix
        levels[domain] = rm_bench_levels(matrix)
        subsets[domain] = mean(list(levels[domain].values()))
    sections = {level: mean([levels[d][level] for d in levels]) for level in ("hard", "normal", "easy")}
    counts = {d: len(idx) for d, idx in rows.items()}
    details = {"matrix": matrices, "levels": levels, "styles": list(RM_BENCH_STYLES)}
    return BenchmarkScore("rm_bench", mean(list(subsets.values())), sections, subsets, counts, details)


class RMBench(BenchmarkKind):
    name = "rm_bench"
    columns = ("prompt", "chosen", "rejected")  # and `domain`, or a per-domain file's name

    def examples(self, rows: list[dict[str, Any]], source: str) -> list[Example]:
        out = []
        named = file_domain(source)
        for index, row in enumerate(rows):
            where = f"{source} row {index}"
            domain = row.get("domain") or named
            if not domain:
                raise DataError(
                    f"{where}: no domain (no `domain` column, and the file name names none of "
                    f"{', '.join(RM_BENCH_FILE_DOMAINS)})",
                    "use the released total_dataset.json, keep a per-domain file's released name "
                    "(e.g. chat_filtered.json), or add a `domain` column",
                )
            chosen = as_text_list(row["chosen"], "chosen", where)
            rejected = as_text_list(row["rejected"], "rejected", where)
            if len(chosen) != 3 or len(rejected) != 3:
                raise DataError(
                    f"{where}: RM-Bench needs 3 chosen and 3 rejected responses, got {len(chosen)} and {len(rejected)}",
                    "use the official RM-Bench files",
                )
            out.append(Example(str(row.get("id", index)), str(domain), row["prompt"], chosen + rejected))
        return out

    def score_fields(self, example: Example, scores: list[float], lengths: list[int]) -> dict[str, Any]:
        return {"score_chosen": scores[:3], "score_rejected": scores[3:], "lengths": lengths}

    def score(self, rows: Sequence[Mapping[str, Any]]) -> BenchmarkScore:
        return score_rm_bench(
            [str(r["subset"]) for r in rows],
            [[float(s) for s in r["score_chosen"]] for r in rows],
            [[float(s) for s in r["score_rejected"]] for r in rows],
        )

    def pairs(self, rows: Sequence[Mapping[str, Any]]) -> list[Pair]:
        """The same-style pairs (the matrix diagonal), so lengths compare like with like."""
        out = []
        for row in rows:
            subset = str(row.get("subset") or "all")
            lengths = row.get("lengths") or [None] * 6
            for i, (c, r) in enumerate(zip(row["score_chosen"], row["score_rejected"])):
                out.append(Pair(subset, float(c), float(r), lengths[i], lengths[3 + i]))
        return out

    def report_html(self, entry: Mapping[str, Any]) -> list[str]:
        """Each domain's style matrix."""
        from rmspec.evaluate.html_parts import esc, pct, table

        matrices = (entry.get("details") or {}).get("matrix") or {}
        styles = (entry.get("details") or {}).get("styles") or []
        return [
            f"<h4>{esc(domain)}: chosen style (rows) beats rejected style (columns)</h4>"
            + table(
                ("chosen \\ rejected", *styles),
                [(styles[i] if i < len(styles) else i, *(pct(v) for v in row)) for i, row in enumerate(matrix)],
                numeric=tuple(range(1, len(styles) + 1)),
            )
            for domain, matrix in matrices.items()
        ]


KIND = RMBench()
