"""Label Studio exports built by hand for the agreement and import tests."""

from __future__ import annotations

LEFT = [{"from_name": "pw", "to_name": "pw", "type": "pairwise", "value": {"selected": "left"}}]

RIGHT = [{"from_name": "pw", "to_name": "pw", "type": "pairwise", "value": {"selected": "right"}}]

TIE = [{"from_name": "tie", "to_name": "prompt", "type": "choices", "value": {"choices": ["tie"]}}]

SIDE = {"first": LEFT, "second": RIGHT, "tie": TIE}

SWAPPED_SIDE = {"first": RIGHT, "second": LEFT, "tie": TIE}


def export_of(
    labels: list[dict[int, str]], swaps: list[bool] | None = None, cancelled: dict | None = None
) -> list[dict]:
    """A JSON export: task k gets annotator -> source-order preference; swapped tasks are clicked on the other side."""
    swaps = swaps or [False] * len(labels)
    out = []
    for k, (votes, swapped) in enumerate(zip(labels, swaps)):
        data = {
            "prompt": f"p{k}",
            "response_a": "x",
            "response_b": "y",
            "rmspec_id": f"s{k}",
            "rmspec_kind": "pairwise",
            "rmspec_swap": swapped,
        }
        anns = [
            {
                "id": 100 * k + a,
                "completed_by": a,
                "was_cancelled": False,
                "result": (SWAPPED_SIDE if swapped else SIDE)[p],
            }
            for a, p in votes.items()
        ]
        for a in (cancelled or {}).get(k, []):
            anns.append({"id": 100 * k + 50 + a, "completed_by": a, "was_cancelled": True, "result": LEFT})
        out.append(
            {
                "id": k + 1,
                "data": data,
                "meta": {"rmspec_id": f"s{k}", "rmspec_kind": "pairwise", "rmspec_swap": swapped},
                "annotations": anns,
            }
        )
    return out
