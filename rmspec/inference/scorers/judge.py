"""The judge kind: a generative judge (a causal LM trained by the generative approach) that writes
a verdict on a pair of responses; it has no score head.

`JudgeEngine` is a `RewardEngine` (the run's layout, chat template and cut) that generates:
greedy replies (`generate`), the judge prompt of each conversation (`judge_prompt_ids`, what the
OpenAI route sends to the batcher) and verdicts on (prompt, A, B) (`verdicts`, what evaluation and
`rmspec score` read). It serves OpenAI chat completions only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import DataError
from rmspec.inference.encoding import Encoded, Prompt, make_layout
from rmspec.inference.loading import max_length_for
from rmspec.inference.scorers.base import Found, Rejected
from rmspec.inference.scorers.reward import RewardEngine, RewardKind
from rmspec.inference.scorers.shapes import PAIRS, Shape
from rmspec.inference.target import Target
from rmspec.spec.benchmarks import ScoredAs
from rmspec.spec.scorer_kind import ScorerKind


@dataclass
class JudgeEngine(RewardEngine):
    kind: str = ScorerKind.JUDGE
    verdict_pattern: str | None = None
    max_new_tokens: int = 64
    encoder: Any = None  # a VLM judge's image side (rmspec.inference.judge.judge_encoder); None: a text judge

    @classmethod
    def load_judge(
        cls, model_dir: str | Path, spec: Any, *, target: Target | None = None, batch_size: int | None = None
    ) -> JudgeEngine:
        """A generative judge (causal LM) with its run's layout and verdict pattern."""
        from rmspec.inference.judge import judge_encoder, load_judge

        model, tokenizer = load_judge(model_dir)
        architecture = spec.model.shape.architecture if spec.model.shape else None
        encoder = judge_encoder(model, tokenizer, model_dir)
        layout = make_layout(tokenizer, spec.data.mapping.chat_template, architecture, pictures=encoder is not None)
        return cls(
            model,
            tokenizer,
            layout,
            min(spec.training.max_length, max_length_for(model, tokenizer)),
            ScorerKind.JUDGE,
            ["verdict"],
            target=target,
            batch_size=batch_size or 8,
            verdict_pattern=spec.approach.verdict_pattern,
            max_new_tokens=spec.approach.max_new_tokens,
            encoder=encoder,
        )

    def outputs(self, encoded: Sequence[Encoded], batch_size: int | None = None) -> list[list[float]]:
        raise TypeError("a generative judge has no score head: use rmspec.inference.judge")

    @property
    def prompt_once(self) -> bool:
        return False

    def generate(
        self,
        conversations: Sequence[Sequence[dict[str, str]]],
        max_new_tokens: int | None = None,
        batch_size: int | None = None,
    ) -> list[str]:
        """A judge's greedy replies to whole conversations, laid out by its run's layout."""
        from rmspec.inference.judge import generate

        return generate(
            self.model,
            self.tokenizer,
            self.judge_prompt_ids(conversations),
            max_new_tokens or self.max_new_tokens,
            batch_size or self.batch_size,
        )

    def judge_prompt_ids(self, conversations: Sequence[Sequence[dict[str, str]]]) -> list[list[int]]:
        """Token ids of each conversation followed by the assistant's turn, left-cut to max_length."""
        layout = self.layout
        texts = layout.prompt_texts([[dict(m) for m in c] for c in conversations])
        # A VLM judge's layout encodes each picture's place as its one id (rmspec.vision.marks).
        encoded = (
            layout.encode(texts) if layout.pictures else self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        )
        head = [] if layout.kind == "template" else list(layout.single_head)
        return [self.encode_ids(head + list(ids)).ids for ids in encoded]

    def verdicts(
        self,
        prompts: Sequence[Prompt],
        responses_a: Sequence[str],
        responses_b: Sequence[str],
        batch_size: int | None = None,
    ) -> list[tuple[str | None, str]]:
        """(verdict, generated text) per pair, with the judge prompt its training data used (a prompt's
        image parts read by a VLM judge: rmspec.inference.judge.generate_requests)."""
        from rmspec.inference.judge import generate_requests, judge_request, parse_verdict

        requests = [judge_request(p, a, b) for p, a, b in zip(prompts, responses_a, responses_b)]
        ids = self.judge_prompt_ids([[{"role": "user", "content": message}] for message, _ in requests])
        texts = generate_requests(
            self.model,
            self.tokenizer,
            ids,
            [images for _, images in requests],
            self.max_new_tokens,
            batch_size or self.batch_size,
            self.encoder,
        )
        return [(parse_verdict(t, self.verdict_pattern or r"\[\[([AB])\]\]"), t) for t in texts]


class JudgeKind(RewardKind):
    kind = ScorerKind.JUDGE
    description = "a generative judge: generates a verdict, has no score head"
    scored_as = ScoredAs.JUDGE
    generates = True
    normalizes = False
    ranks_pairs = False
    shares_prompt = False
    one_score = False
    text_reward = False  # generates a verdict: no reward to score with
    # a causal LM: no score head, so AutoModelForSequenceClassification does not apply
    card_use: tuple[str, ...] = (
        "A generative judge: a causal language model that writes a verdict (`config.rmspec.verdict_pattern`",
        "reads it). It has no score head, so AutoModelForSequenceClassification does not apply.",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "model = AutoModelForCausalLM.from_pretrained(PATH)",
        "tokenizer = AutoTokenizer.from_pretrained(PATH)",
        "```",
        "",
        "```bash",
        "rmspec serve PATH    # POST /v1/chat/completions: the judge prompt rmspec trained it on, both orders",
        "```",
    )

    def claims(self, found: Found) -> bool:
        return found.spec is not None and found.declared == ScorerKind.JUDGE

    def load(
        self, found: Found, *, dtype: str, device: str | None, batch_size: int | None, step_separator: str | None
    ) -> JudgeEngine:
        return JudgeEngine.load_judge(found.model_dir, found.spec, target=found.target, batch_size=batch_size)

    def shape(self, engine: Any, columns: list[str], named: dict[str, str]) -> Shape:
        shape = super().shape(engine, columns, named)
        if shape.kind != PAIRS:
            raise DataError(
                f"a generative judge compares two responses; these rows are {shape.kind}",
                "give prompt + chosen + rejected rows (--columns prompt=..,chosen=..,rejected=..)",
            )
        return shape

    def item(self, engine: Any, row: dict[str, Any], shape: Shape) -> Any:
        """A VLM judge reads the row's images as the vision reward kind does (the `images` column fills
        the prompt's image parts or placeholders; a bad image: Rejected image_<reason>)."""
        if engine.encoder is not None:
            from rmspec.inference.scorers.vision_reward import KIND as VISION

            return VISION.item(engine, row, shape)
        return super().item(engine, row, shape)

    def score(
        self, engine: Any, shape: Shape, items: list[Any], batch_size: int
    ) -> tuple[list[dict[str, Any] | Rejected], tuple[int, int]]:
        """The verdict on (chosen, rejected) and the judge's whole reply."""
        judged = engine.verdicts(
            [its[0][0] for its in items], [its[0][1] for its in items], [its[1][1] for its in items], batch_size
        )
        return [{"verdict": v, "judge_output": text} for v, text in judged], (0, 0)


KIND = JudgeKind()
