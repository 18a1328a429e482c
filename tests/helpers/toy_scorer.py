"""A toy scorer kind from outside rmspec, for tests/test_scorer_registry.py: one module, registered
with one line (RMSPEC_SCORERS=helpers.toy_scorer, or rmspec.inference.scorers.register(KIND)
in-process).

`similarity` scores a (prompt, response) row with a plain encoder (no head): the cosine of the
mean-pooled last hidden states of the prompt and of the response, each encoded on its own. It
claims a model folder that holds `toy_scorer.json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.inference.scorers.base import Found, Rejected, ScorerType
from rmspec.inference.scorers.shapes import SINGLE, Shape, detect, reason
from rmspec.messages import Invalid

MARKER = "toy_scorer.json"


@dataclass
class SimilarityEngine:
    model: Any
    tokenizer: Any
    max_length: int = 128
    batch_size: int = 8
    kind: str = "similarity"
    labels: tuple[str, ...] = ("similarity",)
    can_normalize: bool = False

    def embed(self, texts: list[str]) -> list[list[float]]:
        import torch

        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        with torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return ((hidden * mask).sum(1) / mask.sum(1)).tolist()


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / ((sum(x * x for x in a) ** 0.5) * (sum(y * y for y in b) ** 0.5))


class SimilarityKind(ScorerType):
    kind = "similarity"
    description = "a plain encoder: cosine of the prompt's and the response's mean-pooled states"

    def claims(self, found: Found) -> bool:
        return (Path(found.given) / MARKER).exists()

    def load(
        self, found: Found, *, dtype: str, device: str | None, batch_size: int | None, step_separator: str | None
    ) -> SimilarityEngine:
        from transformers import AutoModel, AutoTokenizer

        folder = str(found.given)
        return SimilarityEngine(AutoModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder))

    def shape(self, engine: Any, columns: list[str], named: dict[str, str]) -> Shape:
        shape = detect(columns, named)
        if shape.kind != SINGLE:
            from rmspec.errors import DataError

            raise DataError(f"the similarity scorer reads prompt + response rows, not {shape.kind}", "--columns")
        return shape

    def item(self, engine: Any, row: dict[str, Any], shape: Shape) -> Any:
        try:
            [(prompt, response)] = shape.items(row)
        except Invalid as exc:
            return Rejected(*reason(exc))
        return prompt, response

    def score(
        self, engine: Any, shape: Shape, items: list[Any], batch_size: int
    ) -> tuple[list[dict[str, Any] | Rejected], tuple[int, int]]:
        prompts = engine.embed([p for p, _ in items]) if items else []
        responses = engine.embed([r for _, r in items]) if items else []
        return [{"similarity": _cosine(p, r)} for p, r in zip(prompts, responses)], (0, 0)


KIND = SimilarityKind()
