"""What every scorer kind declares and does (one subclass per kind, one `KIND` object per module).

A kind answers four questions, so nobody else has to ask "which kind is this?":
- load: does it `claim` a run or model folder, and how is it loaded (`load`);
- `rmspec score`: the row shape it reads (`shape`), one row's input (`item`), a batch's score
  columns (`score`), what the summary adds (`summary`);
- `rmspec serve`: which protocols it answers (`generates`: OpenAI chat; `per_token`: vLLM's
  token_classify; `scores_rows`: /get_reward with prompts and labels; else /classify, /pooling,
  /score, /rerank and /get_reward on texts), whether served rewards are normalized, the line
  it logs at start (`serving`);
- evaluation: how its benchmark rows are read (`scored_as`, rmspec.spec.benchmarks.ScoredAs), and
  whether active selection can rank pairs by its reward margin (`ranks_pairs`).

Light: torch and the engines are imported by the kind modules, inside their methods where heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rmspec.inference.scorers.shapes import Shape
from rmspec.spec.benchmarks import ScoredAs


@dataclass
class Found:
    """What MODEL_OR_RUN names, read once and only as far as a kind's `claims` asks."""

    given: str | Path

    @cached_property
    def target(self) -> Any:
        """rmspec.inference.target.Target: the run directory or model folder."""
        from rmspec.inference.target import resolve_target

        return resolve_target(self.given)

    @property
    def spec(self) -> Any:
        """The run's spec (rmspec.spec.Spec), or None for a bare model folder."""
        loaded = self.target.loaded_spec
        return loaded.spec if loaded is not None else None

    @property
    def declared(self) -> str | None:
        """The scorer kind the run's approach saved (rmspec.approaches), or None for a bare folder."""
        from rmspec import approaches

        return str(approaches.of(self.spec).scorer) if self.spec is not None else None

    @property
    def model_dir(self) -> Path:
        return Path(self.target.model_dir)


@dataclass
class Rejected:
    """A row a kind cannot score: the rejects file's reason, its kind (what the summary counts),
    and score columns to keep beside it (a composite's per-component values)."""

    reason: str
    reason_kind: str
    columns: dict[str, Any] = field(default_factory=dict)


class ScorerType:
    kind: str  # the registry name; a loaded scorer's `kind` attribute carries it
    description: str = ""
    scored_as: ScoredAs = ScoredAs.REWARD  # how evaluation reads its benchmark rows
    reads_steps = False  # --step-separator applies
    generates = False  # a generative judge: OpenAI chat completions
    per_token = False  # per-token outputs: vLLM /pooling with task token_classify
    scores_rows = False  # rows (prompt, response, label), not token ids: /get_reward with prompts and labels
    normalizes = False  # served rewards normalized by the model's reward_mean/reward_std
    ranks_pairs = False  # one reward per response: active selection ranks pairs by the margin
    one_score = False  # a score head with one scalar reward: what a pooling server (vLLM /classify) hosts
    # one scalar reward per text (prompt, response) or templated query, from the text engine's encode, encode_text
    # and outputs: what a composite's model component scores with (rmspec.composite.components.model)
    text_reward = False
    shares_prompt = False  # a causal decoder may compute a prompt once for all its responses
    reads_images = False  # prompts may hold image parts (a vision-language model): rmspec.evaluate.image_prompts
    card_use: tuple[str, ...] = ()  # the model card's `## Use` lines (rmspec.train.final_model)

    # ------------------------------------------------------------------ loading

    def claims(self, found: Found) -> bool:
        """Whether MODEL_OR_RUN holds a scorer of this kind."""
        raise NotImplementedError

    def load(
        self, found: Found, *, dtype: str, device: str | None, batch_size: int | None, step_separator: str | None
    ) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------------ rmspec score

    def shape(self, engine: Any, columns: list[str], named: dict[str, str]) -> Shape:
        """The row shape it scores, from the first row's columns and --columns."""
        raise NotImplementedError

    def item(self, engine: Any, row: dict[str, Any], shape: Shape) -> Any:
        """One row's input to `score`, or `Rejected` with the reason."""
        raise NotImplementedError

    def score(
        self, engine: Any, shape: Shape, items: list[Any], batch_size: int
    ) -> tuple[list[dict[str, Any] | Rejected], tuple[int, int]]:
        """The score columns per item (or `Rejected`), and (real tokens, tokens in the batches)."""
        raise NotImplementedError

    def summary(self, engine: Any) -> dict[str, Any]:
        """What `rmspec score`'s summary adds for this kind."""
        return {}

    # ------------------------------------------------------------------ rmspec serve

    def encode_text(self, engine: Any, text: str, *, add_special_tokens: bool, limit: int | None) -> Any:
        """A served text (vLLM's `input` as a string) as this kind reads it: an Encoded."""
        raise TypeError(f"a {self.kind} scorer does not read served texts")

    def encode_ids(self, engine: Any, ids: list[int], limit: int | None) -> Any:
        """Served token ids (vLLM's `input` as ids) as this kind reads them: an Encoded."""
        raise TypeError(f"a {self.kind} scorer does not read served token ids")

    def encode_with_images(self, engine: Any, prompt: Any, reply: str, images: list[Any]) -> list[Any]:
        """A served conversation whose `<image>` placeholders take `images` (kinds that read images)."""
        raise TypeError(f"a {self.kind} scorer does not read images")

    def serving(self, engine: Any, normalization: str) -> str:
        """The detail of the line `rmspec serve` logs at start."""
        return f"normalization {normalization}"
