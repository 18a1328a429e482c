"""Per-step scores from a process reward model (a token classifier read at each step's last token).

`StepEngine.load(MODEL_OR_RUN)` takes an rmspec PRM (its run directory, or RUN/model whose
config.json carries the step separator under `rmspec`) or any token-classification PRM as TRL's
PRMTrainer saves it (2 labels, label 1 = correct). A folder without rmspec's config is encoded as
TRL's PRMTrainer encodes: BOS (when the tokenizer has one) + the raw prompt + every step followed
by the separator ("\\n" unless given), each piece tokenized on its own; rmspec's own models are
encoded by the data pipeline's StepEncoder, so a step gets the score training would give it.

`score_steps([(prompt, [step, ...])])` returns, per item, P(correct) of each step that fits in
`max_length` (whole steps from the start; a step that does not fit gets no score) and the
predicted first wrong step (P < threshold; -1 for none).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from rmspec.errors import RmspecError
from rmspec.inference.encoding import Encoded, Prompt, as_messages
from rmspec.inference.scorer import ScorerKind

if TYPE_CHECKING:
    from rmspec.data.steps import StepEncoder

DEFAULT_SEPARATOR = "\n"


def is_token_classifier(model_dir: str | Path) -> bool:
    """True when the folder's config names a *ForTokenClassification architecture (a PRM)."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return any(str(a).endswith("ForTokenClassification") for a in config.get("architectures") or [])


def first_error(probs: Sequence[float], threshold: float = 0.5) -> int:
    """The predicted first wrong step: the first with P(correct) < threshold (strict, as the
    official code: a score equal to the threshold counts as correct), or -1 for none."""
    for i, p in enumerate(probs):
        if p < threshold:
            return i
    return -1


@dataclass
class StepScores:
    id: str
    scores: list[float]  # P(correct) per scored step
    prediction: int  # first step with P < threshold, or -1
    steps_scored: int
    steps_total: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "step_scores": self.scores,
            "prediction": self.prediction,
            "steps_scored": self.steps_scored,
            "steps_total": self.steps_total,
        }


class _TrlEncoder:
    """TRL PRMTrainer.tokenize_row's layout: [bos] + prompt + (step + separator) for each step."""

    def __init__(self, tokenizer: Any, separator: str):
        self.tok = tokenizer
        self.sep = tokenizer(separator, add_special_tokens=False)["input_ids"]
        if not self.sep:
            raise RmspecError(
                f"the step separator {separator!r} tokenizes to nothing with this tokenizer",
                "pass the separator the model was trained with (--step-separator)",
            )

    def encode(self, prompts, steps, labels, max_tokens):
        from rmspec.data.steps import IGNORE, StepSequence

        out = []
        for prompt, row in zip(prompts, steps):
            text = "\n\n".join(m["content"] for m in prompt)
            head = [self.tok.bos_token_id] if self.tok.bos_token_id is not None else []
            ids = head + self.tok(text, add_special_tokens=False)["input_ids"]
            n_prompt = len(ids) - len(head)
            token_labels = [IGNORE] * len(ids)
            ends, total = [], len(ids)
            pieces = [self.tok(s, add_special_tokens=False)["input_ids"] + self.sep for s in row]
            total += sum(len(p) for p in pieces)
            for p in pieces:
                if len(ids) + len(p) > max_tokens:
                    break
                ids = ids + p
                token_labels += [IGNORE] * len(p)
                ends.append(len(ids) - 1)
            out.append(
                StepSequence(ids, token_labels, None, ends, n_prompt, total, len(pieces) - len(ends)) if ends else None
            )
        return out


@dataclass
class StepEngine:
    model: Any
    tokenizer: Any
    encoder: Any
    max_length: int
    threshold: float = 0.5
    batch_size: int = 16
    separator: str = DEFAULT_SEPARATOR
    layout_name: str = "trl"
    labels: list[str] = field(default_factory=lambda: ["wrong", "correct"])
    # the engine computing the head (rmspec.inference.engine_base); None: torch on `model`
    backend: Any = None
    kind: ClassVar[Literal[ScorerKind.PROCESS]] = ScorerKind.PROCESS

    @classmethod
    def load(
        cls,
        model_or_run: str | Path,
        *,
        dtype: str = "float32",
        device: str | None = None,
        batch_size: int | None = None,
        separator: str | None = None,
        threshold: float | None = None,
    ) -> StepEngine:
        from rmspec.inference.target import resolve_target

        target = resolve_target(model_or_run)
        spec = target.loaded_spec.spec if target.loaded_spec is not None else None
        model, tokenizer = load_token_classifier(target.model_dir, dtype=dtype, device=device)
        return cls.from_parts(model, tokenizer, spec, batch_size=batch_size, separator=separator, threshold=threshold)

    @classmethod
    def from_parts(
        cls,
        model: Any,
        tokenizer: Any,
        spec: Any = None,
        *,
        batch_size: int | None = None,
        separator: str | None = None,
        threshold: float | None = None,
    ) -> StepEngine:
        from rmspec.inference.loading import max_length_for

        saved = dict(getattr(model.config, "rmspec", None) or {})
        limit = max_length_for(model, tokenizer)
        if spec is not None and spec.approach.step_suffix is not None:  # a PRM's run
            from rmspec import approaches

            # what its model folder's config.json records (step_separator, threshold, chat_template)
            saved.update(approaches.of(spec).config_extra(spec))
            limit = min(limit, spec.training.max_length)
        elif saved.get("max_length"):
            limit = min(limit, int(saved["max_length"]))
        sep = separator if separator is not None else saved.get("step_separator", DEFAULT_SEPARATOR)
        thr = threshold if threshold is not None else float(saved.get("threshold", 0.5))
        encoder: StepEncoder | _TrlEncoder
        if "step_separator" in saved:  # trained by rmspec: the data pipeline's own layout
            from rmspec.data.steps import StepEncoder
            from rmspec.inference.encoding import make_layout

            architecture = spec.model.shape.architecture if spec is not None and spec.model.shape else None
            encoder = StepEncoder(make_layout(tokenizer, saved.get("chat_template", "auto"), architecture), sep)
            name = encoder.layout.kind
        else:
            encoder, name = _TrlEncoder(tokenizer, sep), "trl"
        return cls(model, tokenizer, encoder, limit, thr, batch_size or 16, sep, name)

    # ------------------------------------------------------------------ scoring

    def encode(self, items: Sequence[tuple[Prompt, Sequence[str]]]):
        return self.encoder.encode(
            [as_messages(p) for p, _ in items], [list(s) for _, s in items], None, self.max_length
        )

    def step_probabilities(self, items: Sequence[tuple[Prompt, Sequence[str]]]) -> list[list[float]]:
        """P(correct) per step of each item (steps past max_length get none), from the head the engine
        computes: torch on `model`, or `backend` (rmspec.inference.engine_base) on the same ids."""
        import torch

        seqs = self.encode(items)
        live = [i for i, s in enumerate(seqs) if s is not None]
        ids = [seqs[i].ids for i in live]
        if self.backend is not None:  # another engine (vLLM: serve --engine vllm, export --check), the same ids
            logits = self.backend.token_outputs(ids)
        else:
            logits = token_logits(
                self.model, ids, [seqs[i].type_ids for i in live], self.tokenizer.pad_token_id, self.batch_size
            )
        probs = [correct_probability(torch.tensor(row)).tolist() if row else [] for row in logits]
        out: list[list[float]] = [[] for _ in items]
        for i, p in zip(live, probs):
            out[i] = [p[e] for e in seqs[i].ends]
        return out

    def score_steps(
        self, items: Sequence[tuple[Prompt, Sequence[str]]], ids: Sequence[str] | None = None
    ) -> list[StepScores]:
        probs = self.step_probabilities(items)
        ids = list(ids) if ids is not None else [str(i) for i in range(len(items))]
        return [
            StepScores(ids[k], p, first_error(p, self.threshold), len(p), len(items[k][1])) for k, p in enumerate(probs)
        ]

    # ------------------------------------------------------------------ what the server needs

    can_normalize: ClassVar[bool] = False  # per-step probabilities are not normalised

    def normalize(self, reward: float) -> None:
        return None

    def encode_ids(self, ids: Sequence[int], limit: int | None = None) -> Encoded:
        """Token ids as given (vLLM's `input`); too long: the end goes, so every kept step keeps its score."""
        limit = min(limit or self.max_length, self.max_length)
        return Encoded(list(ids)[:limit], None, len(ids) > limit)

    def outputs(self, encoded: Sequence[Encoded], batch_size: int | None = None) -> list[list[list[float]]]:
        """Raw head logits per token of each encoded sequence ([tokens][labels]), input order
        (vLLM's token_classify)."""
        if self.backend is not None:  # another engine (vLLM: rmspec serve --engine vllm), the same ids
            return self.backend.token_outputs([e.ids for e in encoded])
        return token_logits(
            self.model,
            [e.ids for e in encoded],
            [getattr(e, "type_ids", None) for e in encoded],
            self.tokenizer.pad_token_id,
            batch_size or self.batch_size,
        )


def token_logits(
    model: Any, sequences: Sequence[Sequence[int]], type_ids: Sequence[Any], pad_token_id: int, batch_size: int = 16
) -> list[list[list[float]]]:
    """Head logits at every token of each sequence ([tokens][labels]); length-sorted batches
    (rmspec.inference.batches), right padding and segment ids as in training; results in input order."""
    import torch

    from rmspec.inference.batches import length_batches
    from rmspec.inference.padding import pad_right

    device = next(model.parameters()).device
    out: list[list[list[float]]] = [[] for _ in sequences]
    with torch.inference_mode():
        for batch in length_batches([len(s) for s in sequences], batch_size):
            input_ids, mask = pad_right([sequences[i] for i in batch], pad_token_id)
            extra = {}
            if any(type_ids[i] is not None for i in batch):
                extra["token_type_ids"] = pad_right([type_ids[i] or [0] * len(sequences[i]) for i in batch], 0)[0].to(
                    device
                )
            logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device), **extra).logits.float()
            for i, row in zip(batch, logits.cpu().tolist()):
                out[i] = row[: len(sequences[i])]
    return out


def token_probabilities(
    model: Any, sequences: Sequence[Sequence[int]], type_ids: Sequence[Any], pad_token_id: int, batch_size: int = 16
) -> list[list[float]]:
    """P(correct) at every token of each sequence (see token_logits)."""
    import torch

    logits = token_logits(model, sequences, type_ids, pad_token_id, batch_size)
    return [correct_probability(torch.tensor(row)).tolist() if row else [] for row in logits]


def correct_probability(logits: Any) -> Any:
    """P(step correct) per token: softmax over the 2 labels (label 1), or a sigmoid for a 1-output head."""
    if logits.shape[-1] == 1:
        return logits[..., 0].sigmoid()
    return logits.softmax(-1)[..., 1]


def load_token_classifier(model_dir: str | Path, *, dtype: str = "float32", device: str | None = None):
    """(model, tokenizer) of a token-classification PRM folder (rmspec's or TRL's)."""
    path = Path(model_dir)
    if not (path / "config.json").exists():
        raise RmspecError(
            f"{model_dir} has no config.json: not a Hugging Face model folder",
            "point at the folder that holds config.json and the weights",
        )
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from rmspec.inference.loading import prepare_tokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForTokenClassification.from_pretrained(str(path), dtype=getattr(torch, dtype))
    except (OSError, ValueError) as exc:
        raise RmspecError(
            f"cannot load a token-classification PRM from {model_dir}: {exc}",
            "the folder needs weights, config.json and tokenizer files",
        ) from None
    if model.config.num_labels not in (1, 2):
        raise RmspecError(
            f"{model_dir}: a PRM head has 2 labels (wrong, correct) or 1 (a sigmoid), this one has "
            f"{model.config.num_labels}",
            "point at a process reward model",
        )
    prepare_tokenizer(tokenizer, model)
    model.eval()
    if device:
        model.to(device)
    return model, tokenizer
