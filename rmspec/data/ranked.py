"""Listwise rows (one prompt, N >= 2 scored responses): tokenization and the max_length filter.

Each response becomes its own sequence [prompt | response], tokenized as a pair's sides are; with
`truncate_prompt_left` every response loses the same prompt tokens (sized so that the longest one
fits), so all N still answer the same prompt. A response that cannot fit rejects the whole row: a
ranking with a response silently missing would teach a different order.
"""

from __future__ import annotations

from typing import Any

from rmspec.data.fit import CUT_PROMPT, fit

COLUMNS = ("prompt", "responses_input_ids", "prompt_tokens", "response_tokens", "length", "truncated")


def ranked_columns(types: bool) -> dict[str, Any]:
    from datasets import List, Value

    cols = {
        "prompt": Value("string"),
        "responses_input_ids": List(List(Value("int32"))),
        "prompt_tokens": Value("int32"),
        "response_tokens": List(Value("int32")),
        "length": Value("int32"),
        "truncated": Value("bool"),
    }
    if types:
        cols["responses_token_type_ids"] = List(List(Value("int8")))
    return cols


def tokenize_ranked(stage: Any, batch: dict[str, list]) -> dict[str, list]:
    """`stage` is the TokenizeStage (layout, max_tokens, policy, types, _reject, _decode)."""
    n = len(batch["id"])
    live = [i for i in range(n) if not batch["reject_reason"][i]]
    flat_prompts, flat_responses, owner = [], [], []
    for i in live:
        for response in batch["responses"][i]:
            flat_prompts.append(batch["prompt_messages"][i])
            flat_responses.append(response)
            owner.append(i)
    segs: dict[int, list] = {i: [] for i in live}
    for i, seg in zip(owner, stage.layout.segments(flat_prompts, flat_responses) if owner else []):
        segs[i].append(seg)
    shown = dict(zip(live, stage.layout.prompt_texts([batch["prompt_messages"][i] for i in live])))
    out: dict[str, list] = {k: [None] * n for k in COLUMNS}
    if stage.types:
        out["responses_token_type_ids"] = [[] for _ in range(n)]
    for i in range(n):
        out["prompt"][i], out["responses_input_ids"][i], out["truncated"][i] = "", [], False
        out["prompt_tokens"][i], out["response_tokens"][i], out["length"][i] = 0, [], 0
        if i not in segs:
            continue
        seqs = segs[i]
        out["prompt"][i] = shown[i]
        out["prompt_tokens"][i] = len(seqs[0].prompt)
        out["response_tokens"][i] = [len(s.body) for s in seqs]
        longest = max(len(s) for s in seqs)
        cut = longest - stage.max_tokens if stage.policy == CUT_PROMPT and longest > stage.max_tokens else None
        fitted = []
        for s in seqs:
            f, reason, detail = fit(s, stage.max_tokens, stage.policy, cut)
            if f is None:
                stage._reject(batch, i, reason, detail)
                break
            fitted.append(f)
        else:
            out["truncated"][i] = any(len(f) < len(s) for f, s in zip(fitted, seqs))
            out["responses_input_ids"][i] = [f.ids() for f in fitted]
            # The length-grouped sampler reads the tokens a row computes unpacked: all N sequences.
            out["length"][i] = sum(len(f) for f in fitted)
            if stage.types:
                out["responses_token_type_ids"][i] = [f.type_ids() for f in fitted]
            if out["truncated"][i] and len(fitted[0].prompt) < len(seqs[0].prompt):
                out["prompt"][i] = stage._decode(fitted[0].head + fitted[0].prompt)
    return {**batch, **out}
