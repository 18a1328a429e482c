"""The reward kind's engine: a score-head model (one reward, or one output per pointwise
attribute) or a generative judge, encoded and cut as its run trained.

Moved here from rmspec.inference.engine (which re-exports it). torch/transformers are imported
inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmspec import approaches
from rmspec.inference import scorers
from rmspec.inference.encoding import Encoded, Prompt, encode_many, make_layout
from rmspec.inference.loading import max_length_for
from rmspec.inference.scorer import ScorerKind
from rmspec.inference.scorers.base import Found, Rejected, ScorerType
from rmspec.inference.scorers.shapes import PAIRS, Shape, reason
from rmspec.inference.target import Target
from rmspec.messages import Invalid


@dataclass
class RewardEngine:
    model: Any
    tokenizer: Any
    layout: Any
    max_length: int
    kind: str = ScorerKind.REWARD  # a kind's name (rmspec.inference.scorers): reward, pointwise; judge for JudgeEngine
    labels: list[str] = field(default_factory=lambda: ["reward"])
    mean: float | None = None
    std: float | None = None
    target: Target | None = None
    batch_size: int = 32
    # the engine computing the head (rmspec.inference.engine_base); None: torch on `model`
    backend: Any = None

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(
        cls,
        model_or_run: str | Path,
        *,
        dtype: str = "float32",
        device: str | None = None,
        batch_size: int | None = None,
    ) -> Any:
        """`load_scorer`, by the name older callers use: a PRM folder gives a `StepEngine`, a composite
        run an `rmspec.composite.scorer.CompositeScorer` (rmspec.composite sits above inference)."""
        return scorers.load(model_or_run, dtype=dtype, device=device, batch_size=batch_size)

    @classmethod
    def from_parts(
        cls,
        model: Any,
        tokenizer: Any,
        spec: Any = None,
        *,
        target: Target | None = None,
        batch_size: int | None = None,
    ) -> RewardEngine:
        """A loaded score-head model; `spec` (rmspec.spec.Spec of its run, or None) sets the layout,
        chat template and max_length the model was trained with."""
        chat_template = spec.data.mapping.chat_template if spec is not None else "auto"
        architecture = spec.model.shape.architecture if spec is not None and spec.model.shape else None
        limit = max_length_for(model, tokenizer)
        max_length = min(spec.training.max_length, limit) if spec is not None else limit
        config = model.config
        labels = _head_labels(config)
        kind = (
            ScorerKind.POINTWISE
            if (spec is not None and approaches.of(spec).scorer == ScorerKind.POINTWISE) or len(labels) > 1
            else ScorerKind.REWARD
        )
        return cls(
            model,
            tokenizer,
            make_layout(tokenizer, chat_template, architecture),
            max_length,
            kind,
            labels,
            _finite(getattr(config, "reward_mean", None)),
            _finite(getattr(config, "reward_std", None)),
            target,
            batch_size or (spec.eval.batch_size if spec is not None else 32),
        )

    # ------------------------------------------------------------------ encoding

    def encode(self, items: Sequence[tuple[Prompt, str]]) -> list[Encoded]:
        """(prompt, response) items as training lays them out and cuts them."""
        return encode_many(self.tokenizer, list(items), self.max_length, self.layout)

    def encode_text(self, text: str, *, add_special_tokens: bool = False, limit: int | None = None) -> Encoded:
        """An already formatted text (OpenRLHF's `query`, vLLM's `input`), read where training reads
        the same conversation (encode_served). `add_special_tokens` adds the tokenizer's own
        special tokens where the text does not already hold them.

        Too long: the start is cut, so the end of the response (where the reward is read) stays.
        """
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if add_special_tokens:
            ids = self.read_point.with_specials(ids, self.layout.single_head, self.layout.single_tail)
        return self.encode_served(ids, limit)

    @property
    def read_point(self) -> Any:
        """Where the reward is read in served texts (rmspec.inference.read_point), from this layout."""
        if not hasattr(self, "_read_point"):
            from rmspec.inference.read_point import ReadPoint

            self._read_point = ReadPoint.of(self.layout, self.tokenizer)
        return self._read_point

    def encode_served(self, ids: Sequence[int], limit: int | None = None) -> Encoded:
        """Token ids a client sent: a complete conversation ends (and starts) as training laid it
        out (ReadPoint.canonical), then is cut as training cuts (encode_ids)."""
        return self.encode_ids(self.read_point.canonical(ids), limit)

    def encode_ids(self, ids: Sequence[int], limit: int | None = None) -> Encoded:
        """Token ids as given (vLLM accepts them too), cut as training cuts: the leading special
        tokens (BOS, CLS) stay, then the start of the rest goes. An encoder's text pair gets its
        segment ids back from the separator, so a decoded-and-resent sequence scores as trained."""
        ids = list(ids)
        limit = min(limit or self.max_length, self.max_length)
        truncated = len(ids) > limit
        if truncated:
            special = set(getattr(self.layout, "special_ids", ()) or ())
            keep = 0
            while keep < len(ids) and ids[keep] in special and keep < limit - 1:
                keep += 1
            ids = ids[:keep] + ids[len(ids) - (limit - keep) :]
        return Encoded(ids, self._pair_type_ids(ids), truncated)

    def _pair_type_ids(self, ids: list[int]) -> list[int] | None:
        """Segment ids of `[CLS] prompt [SEP] response [SEP]` (pair layout only): first segment up
        to and including the first separator after the head, second segment after it."""
        layout = self.layout
        if getattr(layout, "kind", None) != "pair" or getattr(layout, "pair_types", None) is None:
            return None
        first, second = layout.pair_types[1], layout.pair_types[3]
        mid, start = list(layout.pair_mid), len(layout.pair_head)
        for j in range(start, len(ids) - len(mid) + 1) if mid else ():
            if ids[j : j + len(mid)] == mid:
                cut = j + len(mid)
                return [first] * cut + [second] * (len(ids) - cut)
        return [first] * len(ids)

    # ------------------------------------------------------------------ scoring

    def outputs(self, encoded: Sequence[Encoded], batch_size: int | None = None) -> list[list[float]]:
        """Every head output per encoded sequence, in input order (length-sorted batches inside)."""
        if not encoded:
            return []
        return self.engine.outputs(
            [e.ids for e in encoded], [e.type_ids for e in encoded], batch_size or self.batch_size
        )

    @property
    def engine(self) -> Any:
        """The inference engine computing the head (rmspec.inference.engine_base): `backend` where one was
        attached (vLLM: rmspec serve --engine), else torch on `model`."""
        from rmspec.inference.engine_base import TorchEngine

        return self.backend or TorchEngine(self.model, self.tokenizer.pad_token_id)

    def rewards(self, items: Sequence[tuple[Prompt, str]], batch_size: int | None = None) -> list[float]:
        """Raw reward (head output 0) per (prompt, response)."""
        return [values[0] for values in self.outputs(self.encode(items), batch_size)]

    def score_pairs(
        self, prompts: Sequence[Prompt], chosen: Sequence[str], rejected: Sequence[str], batch_size: int | None = None
    ) -> tuple[list[float], list[float]]:
        """(chosen rewards, rejected rewards); each prompt computed once where the model allows
        (score_groups), else all sequences in one pool so batches pack well."""
        n = len(prompts)
        if not (len(chosen) == len(rejected) == n):
            raise ValueError("prompts, chosen and rejected differ in length")
        scores = self.score_groups([(p, [c, r]) for p, c, r in zip(prompts, chosen, rejected)], batch_size)
        return [s[0] for s in scores], [s[1] for s in scores]

    @property
    def prompt_once(self) -> bool:
        """Responses to one prompt share one row (a causal decoder whose attention takes a mask)."""
        from rmspec.inference.shared_prefix import can_share_prompt

        if not scorers.of(self).shares_prompt or getattr(self.layout, "kind", None) == "pair" or self.backend:
            return False
        if not hasattr(self, "_prompt_once"):
            self._prompt_once = can_share_prompt(self.model)
        return self._prompt_once

    def score_groups(
        self, groups: Sequence[tuple[Prompt, Sequence[str]]], batch_size: int | None = None
    ) -> list[list[float]]:
        """Raw rewards of several responses per prompt (pairs, best-of-N), in input order. Each
        response is encoded and cut as when scored alone; the prompt is computed once per group
        where prompt_once holds (same scores, rmspec.inference.shared_prefix)."""
        encoded = self.encode([(p, r) for p, responses in groups for r in responses])
        return [
            [values[0] for values in group]
            for group in self.grouped_outputs(_split(encoded, [len(r) for _, r in groups]), batch_size)
        ]

    def grouped_outputs(
        self, groups: Sequence[Sequence[Encoded]], batch_size: int | None = None
    ) -> list[list[list[float]]]:
        """Every head output of already encoded groups (responses to one prompt), in input order:
        one row per group where prompt_once holds, else the ordinary length-sorted batches."""
        if not self.prompt_once:
            return _split(self.outputs([e for group in groups for e in group], batch_size), [len(g) for g in groups])
        from rmspec.inference.shared_prefix import grouped_head_outputs

        return grouped_head_outputs(
            self.model,
            [[e.ids for e in group] for group in groups],
            self.tokenizer.pad_token_id,
            batch_size or self.batch_size,
        )

    def generate(self, conversations: Any, max_new_tokens: int | None = None, batch_size: int | None = None) -> Any:
        raise TypeError("only a generative judge generates text")

    # ------------------------------------------------------------------ normalization

    @property
    def can_normalize(self) -> bool:
        return normalized(0.0, self.mean, self.std) is not None

    def normalize(self, reward: float) -> float | None:
        return normalized(reward, self.mean, self.std)


def normalized(reward: float, mean: float | None, std: float | None) -> float | None:
    """(reward - reward_mean) / reward_std, as the model card says; None without the stats (or std <= 0)."""
    if mean is None or std is None or not std > 0:
        return None
    return (reward - mean) / std


def preference_probability(chosen: float, rejected: float) -> float:
    """P(chosen > rejected) under Bradley-Terry: sigmoid of the reward margin."""
    margin = chosen - rejected
    if margin >= 0:
        return 1.0 / (1.0 + math.exp(-margin))
    z = math.exp(margin)
    return z / (1.0 + z)


def _split(flat: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
    out, cursor = [], 0
    for size in sizes:
        out.append(list(flat[cursor : cursor + size]))
        cursor += size
    return out


def _head_labels(config: Any) -> list[str]:
    id2label = getattr(config, "id2label", None) or {}
    n = getattr(config, "num_labels", 1) or 1
    names = [str(id2label.get(i, id2label.get(str(i), ""))) for i in range(n)]
    # transformers' defaults are LABEL_0, LABEL_1...: a one-output head is a reward.
    if n == 1 and (not names[0] or names[0].startswith("LABEL_")):
        return ["reward"]
    return [name or f"output_{i}" for i, name in enumerate(names)]


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


class RewardKind(ScorerType):
    """A score head: one scalar reward per text (Bradley-Terry, listwise, any sequence classifier).
    Claims whatever no other kind claims; `RewardEngine.from_parts` makes it pointwise when the
    run's approach saved a pointwise model or the head has several outputs."""

    kind = ScorerKind.REWARD
    description = "a score head: one scalar reward per text"
    normalizes = True
    ranks_pairs = True
    shares_prompt = True
    one_score = True
    text_reward = True
    # how transformers loads a score head and reads the reward (pointwise: every output)
    card_use: tuple[str, ...] = (
        "```python",
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
        "model = AutoModelForSequenceClassification.from_pretrained(PATH)",
        "tokenizer = AutoTokenizer.from_pretrained(PATH)",
        "# encoders (BERT family) read (prompt, response) as a text pair; decoders the conversation",
        "# as rendered in training (the tokenizer's chat template, or 'User:/Assistant:' lines)",
        "inputs = tokenizer(prompt, response, return_tensors='pt')",
        "reward = model(**inputs).logits[0, 0]",
        "# normalised: (reward - model.config.reward_mean) / model.config.reward_std",
        "```",
    )

    def claims(self, found: Found) -> bool:
        return True

    def load(
        self, found: Found, *, dtype: str, device: str | None, batch_size: int | None, step_separator: str | None
    ) -> RewardEngine:
        from rmspec.inference.loading import load_reward_model

        model, tokenizer = load_reward_model(found.model_dir, dtype=dtype, device=device)
        return RewardEngine.from_parts(model, tokenizer, found.spec, target=found.target, batch_size=batch_size)

    # ------------------------------------------------------------------ rmspec serve

    def encode_text(self, engine: Any, text: str, *, add_special_tokens: bool, limit: int | None) -> Encoded:
        """Read where training reads the same conversation (RewardEngine.encode_text)."""
        return engine.encode_text(text, add_special_tokens=add_special_tokens, limit=limit)

    def encode_ids(self, engine: Any, ids: list[int], limit: int | None) -> Encoded:
        """A complete conversation ends as training laid it out (RewardEngine.encode_served)."""
        return engine.encode_served(ids, limit)

    # ------------------------------------------------------------------ rmspec score

    def shape(self, engine: Any, columns: list[str], named: dict[str, str]) -> Shape:
        from rmspec.inference.scorers import shapes

        return shapes.detect(columns, named)

    def item(self, engine: Any, row: dict[str, Any], shape: Shape) -> Any:
        """(prompt, response) per scored text; the scorer's layout checks tool turns."""
        try:
            return shape.items(row, getattr(engine, "layout", None))
        except Invalid as exc:
            return Rejected(*reason(exc))

    def score(
        self, engine: Any, shape: Shape, items: list[Any], batch_size: int
    ) -> tuple[list[dict[str, Any] | Rejected], tuple[int, int]]:
        encoded = engine.encode([item for its in items for item in its])
        groups, pos = [], 0
        for its in items:  # a row's texts share its prompt: computed once on decoders (engine.prompt_once)
            groups.append(encoded[pos : pos + len(its)])
            pos += len(its)
        outputs = engine.grouped_outputs(groups, batch_size)
        return (
            [self.columns(engine, shape, outs, enc) for outs, enc in zip(outputs, groups)],
            _padding([len(e.ids) for e in encoded], batch_size),
        )

    def columns(self, engine: Any, shape: Shape, outs: list[list[float]], enc: list[Any]) -> dict[str, Any]:
        """The reward (a pair: both, the margin, P(chosen > rejected)), normalized where the model
        carries the statistics, an ensemble's members' std, and whether a text was cut."""
        from rmspec.inference.ensemble import member_std

        truncated = any(e.truncated for e in enc)
        cols: dict[str, Any]
        if shape.kind == PAIRS:
            chosen, rejected = outs[0][0], outs[1][0]
            cols = {
                "reward_chosen": chosen,
                "reward_rejected": rejected,
                "margin": chosen - rejected,
                "p_chosen": preference_probability(chosen, rejected),
            }
            if engine.can_normalize:
                cols.update(
                    reward_chosen_normalized=engine.normalize(chosen),
                    reward_rejected_normalized=engine.normalize(rejected),
                )
            if len(outs[0]) > 1:  # an ensemble (rmspec.inference.ensemble): outputs 1.. are its members
                cols.update(reward_std_chosen=member_std(outs[0]), reward_std_rejected=member_std(outs[1]))
            return {**cols, "truncated": truncated}
        cols = {"reward": outs[0][0]}
        if engine.can_normalize:
            cols["reward_normalized"] = engine.normalize(outs[0][0])
        if len(outs[0]) > 1:
            cols["reward_std"] = member_std(outs[0])
        return {**cols, "truncated": truncated}


def _padding(lengths: list[int], batch_size: int) -> tuple[int, int]:
    """(real tokens, tokens in length-sorted batches of one sequence per text): see rmspec.score.runner's
    note on decoders that compute each prompt once."""
    from rmspec.inference.batches import length_batches

    batches = length_batches(lengths, batch_size)
    computed = sum(max(lengths[i] for i in batch) * len(batch) for batch in batches)
    return sum(lengths), computed


KIND = RewardKind()
