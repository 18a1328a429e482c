"""The max_length policies and how one sequence is fitted to the limit (used by pairs, rows,
listwise rows and the scorer's encoder alike)."""

from __future__ import annotations

from rmspec.data.layout import Segments

DROP, CUT_PROMPT, CUT_RESPONSE = "drop", "truncate_prompt_left", "truncate_response"


def fit(seq: Segments, limit: int, policy: str, prompt_cut: int | None = None) -> tuple[Segments | None, str, str]:
    """Apply the policy to one sequence: (fitted or None, reject reason, detail)."""
    n = len(seq)
    if n <= limit and not prompt_cut:
        return seq, "", ""
    if policy == DROP:
        return None, "too_long", f"{n} tokens > max {limit}"
    if policy == CUT_PROMPT:
        cut = prompt_cut if prompt_cut is not None else n - limit
        if cut > len(seq.prompt):
            need = n - len(seq.prompt)
            return (
                None,
                "response_too_long",
                f"the response alone needs {need} tokens > max {limit} (prompt already empty)",
            )
        return Segments(seq.head, seq.prompt[cut:], seq.mid, seq.body, seq.tail, seq.types), "", ""
    over = n - limit
    if over >= len(seq.body):
        return (
            None,
            "prompt_too_long",
            f"the prompt leaves no room for the response ({n - len(seq.body)} tokens without it, max {limit})",
        )
    return Segments(seq.head, seq.prompt, seq.mid, seq.body[: len(seq.body) - over], seq.tail, seq.types), "", ""
