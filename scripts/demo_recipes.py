"""Demo data for the training recipes (issue 21), built from make_demo_data's content families.

Loaded by make_demo_data.py, which passes its globals in as `base` (its families, filler and openers), so
this file imports nothing from it and the two stay one-way. Each variant has its own seeds: adding or
changing one leaves every other file byte-identical.

- `ranked`: four scored completions per prompt ({prompt, responses, scores}, UltraFeedback-like 1-10
  scores). Quality has two levels of signal: the family's content (right or wrong) matters most, tone
  (a rude opener and sign-off) next, so the order is right-polite > right-rude > wrong-polite >
  wrong-rude. In about 15% of prompts the wrong-rude response is replaced by a second right-polite
  one with the same score (a tie in the labels). Length says nothing: the length order of the four is
  a random permutation, enforced with filler. 3% of training prompts swap two adjacent scores.
- `length_biased`: pairs whose chosen response is the longer one in 80% of training pairs (filler
  decides, as in the main demo data where it is a coin flip), and a held-out set where it is exactly
  half: a reward model that learned length drops to chance on the length half it relied on.
- `ties`: pairs where 20% carry `tie: true`: both responses are the same answer (both right or, half
  the time, both wrong) in different wording (openers, filler), equally good by construction. The rest
  are ordinary pairs with `tie: false`, as `rmspec annotate import --ties keep` writes them.

Only items whose family leaves the length free (no "answer in one word" constraint) are used, since
filler is how length is controlled here.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

RANKED_SEED, RANKED_HELDOUT_SEED = 4401, 4402
LENGTH_SEED, LENGTH_HELDOUT_SEED = 4501, 4502
TIES_SEED, TIES_HELDOUT_SEED = 4601, 4602
N_RANKED, N_RANKED_HELDOUT = 800, 200
N_LENGTH, N_LENGTH_HELDOUT = 1600, 400
N_TIES, N_TIES_HELDOUT = 1500, 400
RANKED_TIE_SHARE = 0.15
LENGTH_BIAS = 0.8
TIE_SHARE = 0.2
LABEL_NOISE = 0.03


def draw_item(
    base: Any, rng: random.Random, index: int, exclude: set[str], families: list[str] | None = None
) -> tuple[str, str, str, str]:
    """(family, prompt, right, wrong) with the length left free, its prompt not in `exclude`; the
    family rotates as in make_pairs."""
    names = families or list(base.FAMILIES)
    for _ in range(1000):
        family = names[index % len(names)] if rng.random() < 0.7 else rng.choice(names)
        prompt, right, wrong, bias = base.FAMILIES[family](rng)
        if family == "constraints":
            prompt = base.persona(rng) + prompt
        if bias is None and prompt not in exclude:
            return family, prompt, right, wrong
    raise RuntimeError("could not draw a free-length item with a new prompt")


def styled(base: Any, rng: random.Random, family: str, text: str) -> str:
    # tone's openers are its signal; every other family gets a neutral opener drawn per response
    return text if family == "tone" else base.decorate(rng, text)


def pad_to_length_order(base: Any, rng: random.Random, texts: list[str], order: list[int]) -> list[str]:
    """Append filler so that the responses' word counts increase along `order` (shortest first), each
    at least 2 words longer than the one before; no sentence of filler twice within a prompt."""
    pool = list(base.FILLER)
    rng.shuffle(pool)
    out, previous = list(texts), -1
    for idx in order:
        while base.words(out[idx]) < previous + 2 and pool:
            out[idx] += " " + pool.pop()
        previous = base.words(out[idx])
    return out


def ranked_rows(
    base: Any, seed: int, n: int, noise: float, exclude: set[str], prefix: str, group_key: str
) -> list[dict]:
    rng = random.Random(seed)
    families = [f for f in base.FAMILIES if f != "tone"]  # tone is the second axis here
    rows = []
    for i in range(n):
        family, prompt, right, wrong = draw_item(base, rng, i, exclude, families)

        def rude(text: str) -> str:
            return rng.choice(base.RUDE_OPEN) + text + rng.choice(base.RUDE_CLOSE)

        best = rng.choice([8, 9, 10])
        responses = [styled(base, rng, family, right), rude(right), styled(base, rng, family, wrong)]
        scores = [best, rng.choice([5, 6, 7]), rng.choice([3, 4])]
        if rng.random() < RANKED_TIE_SHARE:
            responses.append(styled(base, rng, family, right))
            scores.append(best)
        else:
            responses.append(rude(wrong))
            scores.append(rng.choice([1, 2]))
        if rng.random() < noise:  # swap the scores of two neighbours in the labelled order
            k = rng.randrange(3)
            scores[k], scores[k + 1] = scores[k + 1], scores[k]
        order = list(range(4))
        rng.shuffle(order)
        responses = pad_to_length_order(base, rng, responses, order)
        shown = list(range(4))
        rng.shuffle(shown)
        rows.append(
            {
                "id": f"{prefix}-{i:05d}",
                "prompt": prompt,
                "responses": [responses[j] for j in shown],
                "scores": [float(scores[j]) for j in shown],
                group_key: family,
            }
        )
    return rows


def pair_rows(
    base: Any,
    seed: int,
    n: int,
    noise: float,
    exclude: set[str],
    prefix: str,
    group_key: str,
    chosen_longer,
    tie_share: float = 0.0,
) -> list[dict]:
    """Pairs from the families; `chosen_longer(rng, i)` says which side filler makes longer. With
    `tie_share`, that share of rows is a tie (both sides one answer) and every row carries `tie`."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        family, prompt, right, wrong = draw_item(base, rng, i, exclude)
        is_tie = tie_share > 0 and rng.random() < tie_share
        if is_tie:
            right = wrong = right if rng.random() < 0.5 else wrong
        elif rng.random() < noise:
            right, wrong = wrong, right
        # openers first, then filler, so that filler alone decides which side is longer
        chosen, rejected = styled(base, rng, family, right), styled(base, rng, family, wrong)
        chosen, rejected = base.pad_pair(rng, chosen, rejected, chosen_longer=chosen_longer(rng, i))
        row = {"id": f"{prefix}-{i:05d}", "prompt": prompt, "chosen": chosen, "rejected": rejected}
        if tie_share > 0:
            row["tie"] = is_tie
        rows.append({**row, group_key: family})
    return rows


def recipe_files(base: Any, train_prompts: set[str]) -> dict[str, list[dict]]:
    """Every recipe file; held-out files share no prompt with their training file or the main demo's."""
    files = {}

    def held_out(train: list[dict]) -> set[str]:
        return train_prompts | {r["prompt"] for r in train}

    ranked = ranked_rows(base, RANKED_SEED, N_RANKED, LABEL_NOISE, train_prompts, "ranked", "family")
    files["demo/ranked.jsonl"] = ranked
    files["demo/ranked_heldout.jsonl"] = ranked_rows(
        base, RANKED_HELDOUT_SEED, N_RANKED_HELDOUT, 0.0, held_out(ranked), "ranked-bench", "subset"
    )
    biased = pair_rows(
        base,
        LENGTH_SEED,
        N_LENGTH,
        LABEL_NOISE,
        train_prompts,
        "long",
        "family",
        lambda rng, i: rng.random() < LENGTH_BIAS,
    )
    files["demo/length_biased.jsonl"] = biased
    files["demo/length_balanced_heldout.jsonl"] = pair_rows(
        base,
        LENGTH_HELDOUT_SEED,
        N_LENGTH_HELDOUT,
        0.0,
        held_out(biased),
        "long-bench",
        "subset",
        lambda rng, i: i % 2 == 0,
    )
    ties = pair_rows(
        base,
        TIES_SEED,
        N_TIES,
        LABEL_NOISE,
        train_prompts,
        "ties",
        "family",
        lambda rng, i: rng.random() < 0.5,
        tie_share=TIE_SHARE,
    )
    files["demo/ties.jsonl"] = ties
    files["demo/ties_heldout.jsonl"] = pair_rows(
        base,
        TIES_HELDOUT_SEED,
        N_TIES_HELDOUT,
        0.0,
        held_out(ties),
        "ties-bench",
        "subset",
        lambda rng, i: rng.random() < 0.5,
        tie_share=TIE_SHARE,
    )
    return files


def longer_is_better(scores: list[float], lengths: list[int]) -> tuple[float, int]:
    """Over the ordered pairs with different scores: share where the better one is longer (equal
    lengths count half), and the number of such pairs."""
    hits, total = 0.0, 0
    for i in range(len(scores)):
        for j in range(len(scores)):
            if scores[i] > scores[j]:
                total += 1
                hits += 1.0 if lengths[i] > lengths[j] else 0.5 if lengths[i] == lengths[j] else 0.0
    return hits, total


def recipe_stats(base: Any, files: dict[str, list[dict]]) -> list[str]:
    """The lines `make_demo_data.py --check` prints for the recipe files."""
    lines = []
    for name in ("demo/ranked.jsonl", "demo/ranked_heldout.jsonl"):
        rows = files[name]
        hits = total = 0
        for r in rows:
            h, t = longer_is_better(r["scores"], [base.words(x) for x in r["responses"]])
            hits, total = hits + h, total + t
        tied = sum(len(set(r["scores"])) < len(r["scores"]) for r in rows)
        lines.append(
            f"{name}: {len(rows)} prompts x {len(rows[0]['responses'])} responses; "
            f"prompts with tied scores {tied} ({tied / len(rows):.1%}); "
            f"longer = better over {total} scored pairs (words) {hits / total:.3f}"
        )
    for name in (
        "demo/length_biased.jsonl",
        "demo/length_balanced_heldout.jsonl",
        "demo/ties.jsonl",
        "demo/ties_heldout.jsonl",
    ):
        rows = files[name]
        pairs = [r for r in rows if not r.get("tie")]
        group = "family" if "family" in rows[0] else "subset"
        heuristic = base.length_heuristic(pairs, group_key=group)["(all)"]
        line = f"{name}: {len(rows)} rows; longer = chosen (words, non-tie rows) {heuristic:.3f}"
        if "tie" in rows[0]:
            ties = sum(r["tie"] for r in rows)
            line += f"; ties {ties} ({ties / len(rows):.1%})"
        line += f"; families {dict(Counter(r[group] for r in rows))}"
        lines.append(line)
    return lines
