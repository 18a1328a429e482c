"""The mapping stage: source rows -> canonical records (rmspec.data.presets.RowMapper), one reject
record for each row that does not fit; helpsteer2's `pair_by` turns scored responses into pairs."""

from __future__ import annotations

from typing import Any

from rmspec.data import records as R
from rmspec.data.identity import prompt_key
from rmspec.data.presets import RowMapper
from rmspec.data.records import Reject
from rmspec.data.tool_store import pack
from rmspec.spec.row_kinds import RowKind


class MapBatch:
    """Batched map: source rows -> canonical records (or one reject record per unfit row)."""

    def __init__(self, mapper: RowMapper, kind: str, encoded: bool = False, source: str = ""):
        self.mapper = mapper
        self.source = source  # the dataset's name, carried by every record
        self.kind = kind
        self.encoded = encoded  # rows read by hand: every value JSON-encoded (hand_read.json_lines_by_hand)
        self.names = list(R.features(kind, images=mapper.images is not None))

    def __call__(self, batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        out: dict[str, list] = {k: [] for k in self.names}
        keys = list(batch)
        for j, index in enumerate(indices):
            row = {k: batch[k][j] for k in keys}
            try:
                if self.encoded:
                    row = _decode(row)
                recs = self.mapper(row, index)
                bad = None
            except Reject as rej:
                recs, bad = [{**R.empty_record(self.kind), "id": _safe_id(row, self.mapper, index), "group": ""}], rej
            for rec in recs:
                rec.update(
                    source_index=index,
                    augmented=False,
                    reject_stage="",
                    reject_reason="",
                    reject_detail="",
                    raw="",
                    source=self.source,
                )
                if bad is not None:
                    rec.update(
                        reject_stage="map", reject_reason=bad.reason, reject_detail=bad.detail, raw=R.to_json_row(row)
                    )
                rec["prompt_key"] = prompt_key(rec) if bad is None else ""  # text, tools and pictures
                rec["tools"] = pack(rec)  # tool parts leave the messages for Arrow (rmspec.data.tool_store)
                for k in self.names:
                    out[k].append(rec.get(k))
        return out


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    from rmspec.data.hand_read import BAD_LINE, decode_row

    try:
        return decode_row(row)
    except ValueError as exc:
        raise Reject("invalid_json", str(exc)) from None
    finally:
        row.pop(BAD_LINE, None)


def _safe_id(row: dict[str, Any], mapper: RowMapper, index: int) -> str:
    try:
        return mapper._id(row, index)
    except Exception:
        return f"row-{index}"


def pair_by_prompt(ds: Any, attribute: str) -> Any:
    """helpsteer2 + pair_by: the best and worst scored responses of each prompt become a pair."""
    import datasets

    rows = ds.to_list()
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if not r["reject_reason"]:
            groups.setdefault(r["prompt_key"], []).append(i)
    out = []
    done: set[int] = set()
    for members in groups.values():
        ranked = sorted(members, key=lambda i: -rows[i]["scores"][0])
        best, worst = rows[ranked[0]], rows[ranked[-1]]
        if len(members) < 2 or best["scores"][0] == worst["scores"][0]:
            reason, detail = (
                ("no_pair_partner", "the only response to its prompt")
                if len(members) < 2
                else ("tie", f"all responses to the prompt score {best['scores'][0]:g} on {attribute}")
            )
            for i in members:
                rows[i].update(reject_stage="map:pair_by", reject_reason=reason, reject_detail=detail)
            continue
        shared = ("source_index", "source", "id", "group", "augmented", "prompt_key", "prompt_messages", "tools")
        out.append(
            {
                **{k: best[k] for k in shared},
                "reject_stage": "",
                "reject_reason": "",
                "reject_detail": "",
                "raw": "",
                "chosen": best["response"],
                "rejected": worst["response"],
                "margin": best["scores"][0] - worst["scores"][0],
                "score_chosen": best["scores"][0],
                "score_rejected": worst["scores"][0],
                "tie": False,
            }
        )
        done.update((ranked[0], ranked[-1]))
        for i in ranked[1:-1]:
            rows[i].update(
                reject_stage="map:pair_by",
                reject_reason="not_paired",
                reject_detail="between the best and the worst response of its prompt",
            )
    for i, r in enumerate(rows):
        if i in done:
            continue
        if not r["reject_reason"]:  # cannot happen: every live row was paired or marked
            raise AssertionError("pair_by left a row unaccounted")
        out.append(
            {
                **{
                    k: r[k]
                    for k in (
                        "source_index",
                        "source",
                        "id",
                        "group",
                        "augmented",
                        "prompt_key",
                        "prompt_messages",
                        "tools",
                        "reject_stage",
                        "reject_reason",
                        "reject_detail",
                    )
                },
                "raw": r["raw"]
                or R.to_json_row(
                    {
                        "prompt": r["prompt_messages"],
                        "response": r["response"],
                        attribute: r["scores"][0] if r["scores"] else None,
                    }
                ),
                "chosen": "",
                "rejected": "",
                "margin": 0.0,
                "score_chosen": None,
                "score_rejected": None,
                "tie": False,
            }
        )
    return datasets.Dataset.from_list(out, features=R.features(RowKind.PAIRS))
