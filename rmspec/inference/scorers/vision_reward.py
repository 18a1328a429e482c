"""The vision-reward kind: a score head on a vision-language model (rmspec.vision.models), whose
prompts may hold images.

The modality lives here, in the encoder, and nowhere else: a prompt is a conversation whose user
content may hold image parts, ``{"type": "image", "image": IMAGE}`` (IMAGE a decoded picture, a path
or a ``data:`` URI: what rmspec.vision.images.decode_image reads), in the Hugging Face processor
convention. The engine encodes as training does: each image part becomes the data stage's picture
mark (rmspec.vision.marks: one id no text encodes to), the conversation is laid out and cut by the
data pipeline's layout (the run's chat template and max_length), and rmspec.vision.collate.VisionEncoder
(training's) splices each picture's visual tokens where it stands; the score head is read at the last
token. A ``<image>`` written in a message's text is text. On the tiny Qwen2-VL this equals a plain transformers forward of the processor's
own chat template and image handling (tests/test_vision_score.py).

- `rmspec eval`: benchmark prompts carry their image parts (rmspec.evaluate.image_prompts);
- `rmspec score`: a row's `images` column (a list, or one image) fills the prompt's
  ``{"type": "image"}`` parts, else its ``<image>`` placeholders (LLaVA-style: the data stage's rule,
  rmspec.vision.rows.place_pictures, with the default placeholder; a prompt with neither is
  ``image_count_mismatch``, and ``<image>`` anywhere else is text). Paths resolve against the input file's
  folder; a row whose image is missing, does not decode, is too large, or whose places and images differ
  in number goes to the rejects file as ``image_<reason>``, and the other rows are scored;
- `rmspec serve`: OpenAI ``image_url`` parts (rmspec.serve.chat) arrive as image parts.

Each sequence is computed whole (no prompt shared between responses); the cut to ``max_length``
is the data stage's (a cut through a picture would lose it: keep max_length above the prompt's length).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmspec.inference.scorers.base import Found, Rejected
from rmspec.inference.scorers.reward import RewardKind, _finite, _head_labels, _split, normalized
from rmspec.inference.scorers.shapes import Shape, reason
from rmspec.inference.scorers.vision_prompts import (
    WholeTooLong,
    openai_messages,
    placeholders,
    with_image_parts,
)
from rmspec.messages import Invalid
from rmspec.spec.scorer_kind import ScorerKind

IMAGES_COLUMN = "images"  # the column of a scored file that holds each row's images (the training convention)


@dataclass
class VisionInput:
    """One sequence as the processor reads it: the rendered text and its images, in order."""

    text: str  # unused ("" ): the ids are what the model reads
    images: list[Any]
    ids: list[int] = field(default_factory=list)  # as the data stage tokenizes it, each image one picture id
    truncated: bool = False
    type_ids: None = None  # no segments (what serve asks of every encoded item)
    # (prompt with its image parts, reply): what an engine that renders and resizes itself (vLLM) is sent
    conversation: tuple[Any, str] | None = None


@dataclass
class VisionRewardEngine:
    model: Any
    processor: Any
    max_length: int
    layout: Any  # the data pipeline's layout (rmspec.data.layout): what training tokenized
    image_text: str  # how one image part is written before the processor expands it (rmspec.vision.processor)
    kind: str = ScorerKind.VISION_REWARD
    labels: list[str] = field(default_factory=lambda: ["reward"])
    mean: float | None = None
    std: float | None = None
    target: Any = None
    batch_size: int = 8
    backend: Any = None  # an engine that computes the head instead of `model` (rmspec.inference.engine_vllm)
    # With a backend that renders whole conversations (vLLM, started with max_length as its model length): each
    # served conversation is measured with its visual tokens (`positions`), to refuse one it would refuse
    whole: bool = False
    positions_by_size: dict[tuple[int, ...], int] = field(default_factory=dict)  # image_positions' counts

    @property
    def tokenizer(self) -> Any:
        return self.processor.tokenizer

    # ------------------------------------------------------------------ encoding

    def encode(self, items: Sequence[tuple[Any, str]]) -> list[VisionInput]:
        """(prompt, response) items as training reads them: the image parts become the data stage's
        picture marks, the conversation is laid out and cut by the data pipeline's layout
        (rmspec.inference.encoding), and the images travel beside the ids."""
        from rmspec.inference.encoding import encode_many

        flat, images = zip(*(placeholders(prompt) for prompt, _ in items)) if items else ((), ())
        encoded = encode_many(self.tokenizer, [(p, r) for p, (_, r) in zip(flat, items)], self.max_length, self.layout)
        return [
            VisionInput("", list(imgs), e.ids, e.truncated, conversation=item)
            for e, imgs, item in zip(encoded, images, items)
        ]

    # ------------------------------------------------------------------ scoring

    def outputs(self, inputs: Sequence[VisionInput], batch_size: int | None = None) -> list[list[float]]:
        """Every head output per input, in input order. The batch is built as training builds it
        (rmspec.vision.collate.VisionEncoder: each picture's visual tokens spliced where it stands, right
        padding); the generic head reads the last non-pad token. With a `backend` (`rmspec serve --engine
        vllm`), the conversations go to it whole, their pictures as image_url parts: vLLM renders them with the
        run's chat template and resizes within the run's pixel bounds (rmspec.export.vllm_vision checked both
        at start), so it reads the tokens this encoder would splice."""
        if self.backend is not None:
            return self.backend.conversation_outputs([openai_messages(*conversation_of(item)) for item in inputs])
        import torch

        from rmspec.vision.collate import VisionEncoder

        encoder = VisionEncoder(self.processor, self.image_text)
        size = batch_size or self.batch_size
        out: list[list[float]] = []
        device = next(self.model.parameters()).device
        for start in range(0, len(inputs), size):
            batch = inputs[start : start + size]
            encoded = encoder([item.ids for item in batch], [item.images for item in batch])
            with torch.no_grad():
                logits = self.model(**{k: v.to(device) for k, v in encoded.items()}).logits
            out.extend(logits.float().cpu().tolist())
        return out

    def rewards(self, items: Sequence[tuple[Any, str]], batch_size: int | None = None) -> list[float]:
        return [values[0] for values in self.outputs(self.encode(items), batch_size)]

    def positions(self, item: VisionInput) -> int:
        """The positions the language model reads for `item` (what training's max_length counts): each picture
        mark becomes the family's image text as its processor expands it for that picture."""
        return len(item.ids) + sum(self.image_positions(image) - 1 for image in item.images)

    def image_positions(self, image: Any) -> int:
        """The tokens one picture's image text becomes (its pad or placeholder expanded by the processor). The
        expansion depends only on the picture's size, so the processor runs once per size (a served request's
        pictures are counted on the event path: repeated sizes cost nothing)."""
        size = tuple(image.size)
        if size not in self.positions_by_size:
            encoded = self.processor(text=[self.image_text], images=[[image]], add_special_tokens=False)
            self.positions_by_size[size] = len(encoded["input_ids"][0])
        return self.positions_by_size[size]

    def score_groups(
        self, groups: Sequence[tuple[Any, Sequence[str]]], batch_size: int | None = None
    ) -> list[list[float]]:
        """Raw rewards of several responses per prompt, in input order (each sequence whole)."""
        inputs = self.encode([(p, r) for p, responses in groups for r in responses])
        flat = [values[0] for values in self.outputs(inputs, batch_size)]
        return _split(flat, [len(r) for _, r in groups])

    def score_pairs(
        self, prompts: Sequence[Any], chosen: Sequence[str], rejected: Sequence[str], batch_size: int | None = None
    ) -> tuple[list[float], list[float]]:
        scores = self.score_groups([(p, [c, r]) for p, c, r in zip(prompts, chosen, rejected, strict=True)], batch_size)
        return [s[0] for s in scores], [s[1] for s in scores]

    def grouped_outputs(self, groups: Sequence[Sequence[VisionInput]], batch_size: int | None = None) -> Any:
        return _split(self.outputs([e for g in groups for e in g], batch_size), [len(g) for g in groups])

    def generate(self, conversations: Any, max_new_tokens: int | None = None, batch_size: int | None = None) -> Any:
        raise TypeError("only a generative judge generates text")

    # ------------------------------------------------------------------ normalization

    @property
    def can_normalize(self) -> bool:
        return normalized(0.0, self.mean, self.std) is not None

    def normalize(self, reward: float) -> float | None:
        return normalized(reward, self.mean, self.std)


def conversation_of(item: VisionInput) -> tuple[Any, str]:
    if item.conversation is None:
        raise ValueError("an encoded item without its conversation: encode it with VisionRewardEngine.encode")
    return item.conversation


class VisionRewardKind(RewardKind):
    """A score head on a vision-language model (config.json has a vision_config)."""

    kind = ScorerKind.VISION_REWARD
    description = "a score head on a vision-language model: prompts may hold images"
    reads_images = True
    shares_prompt = False  # each sequence is computed whole (its image with it)
    one_score = False  # not a text classifier a pooling server hosts: vLLM's multimodal pooling is unchecked
    text_reward = False  # its engine reads images beside the text: not the text engine a composite scores with
    card_use: tuple[str, ...] = ()  # the VLM card's snippet is rmspec.vision.models.card_snippet

    def claims(self, found: Found) -> bool:
        config = Path(found.model_dir) / "config.json"
        if not config.is_file():
            return False
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(data, dict) and "vision_config" in data

    def load(
        self, found: Found, *, dtype: str, device: str | None, batch_size: int | None, step_separator: str | None
    ) -> Any:  # a VisionRewardEngine
        return load_vision_engine(
            found.model_dir, dtype=dtype, device=device, batch_size=batch_size, target=found.target, spec=found.spec
        )

    # ------------------------------------------------------------------ rmspec serve

    def encode_text(self, engine: Any, text: str, *, add_special_tokens: bool, limit: int | None) -> Any:
        raise TypeError("a vision reward model reads conversations with images (the chat routes), not bare texts")

    def encode_ids(self, engine: Any, ids: list[int], limit: int | None) -> Any:
        raise TypeError("a vision reward model reads conversations with images (the chat routes), not token ids")

    def encode_with_images(self, engine: Any, prompt: Any, reply: str, images: list[Any]) -> list[Any]:
        """A served conversation (rmspec.serve.chat.image_conversation put a picture mark where each part was).
        On an engine that renders whole conversations (vLLM), one rmspec would cut, or longer than max_length
        with its visual tokens, is WholeTooLong: vLLM scores it whole or not at all, and refuses past its length."""
        encoded = list(engine.encode([(with_image_parts(prompt, images), reply)]))
        if engine.whole:
            for item in encoded:
                length = engine.positions(item)
                if item.truncated or length > engine.max_length:
                    raise WholeTooLong(length, engine.max_length)
        return encoded

    # ------------------------------------------------------------------ rmspec score

    def item(self, engine: Any, row: dict[str, Any], shape: Shape) -> Any:
        """The row's (prompt with its images, response) items, or Rejected: image_<reason>."""
        from rmspec.vision.images import IMAGE_PLACEHOLDER, ImageReject, decode_image, images_of
        from rmspec.vision.marks import in_text
        from rmspec.vision.rows import flatten_parts, place_pictures

        column = IMAGES_COLUMN
        given = images_of(row.get(column))
        try:
            marked = next((k for k, v in row.items() if k != column and in_text(v)), None)
            if marked is not None:
                raise ImageReject(
                    "mark_in_text",
                    f"{marked}: the text holds U+FFFC (OBJECT REPLACEMENT CHARACTER), which rmspec reserves for a "
                    "picture's place; remove it from the text",
                )
            flat = {k: flatten_parts(v) if isinstance(v, list) else v for k, v in row.items()}
            # Where the pictures go: the data stage's rule (image parts, else LLaVA-style `<image>` in the prompt).
            prompt_col = shape.columns.get("prompt") or shape.columns.get("messages")
            if prompt_col and flat.get(prompt_col) is not None:
                whole = prompt_col != shape.columns.get("prompt")
                flat[prompt_col] = place_pictures(flat[prompt_col], len(given), IMAGE_PLACEHOLDER, whole)
            else:  # whole conversations: each side's user turns
                for s, c in shape.columns.items():
                    if s in ("chosen", "rejected") and isinstance(flat.get(c), list):
                        flat[c] = place_pictures(flat[c], len(given), IMAGE_PLACEHOLDER, True)
            images = []
            for k, value in enumerate(given):
                try:
                    images.append(decode_image(value, shape.base_dir, allow_urls=shape.allow_image_urls))
                except ImageReject as exc:
                    allow = " (rmspec score --allow-image-urls downloads it)" if exc.reason == "url_refused" else ""
                    raise ImageReject(exc.reason, f"{column}[{k}]: {exc.detail}{allow}") from None
        except ImageReject as exc:
            return Rejected(f"image_{exc.reason}: {exc.detail}", f"image_{exc.reason}")
        try:
            items = shape.items(flat)
        except Invalid as exc:
            return Rejected(*reason(exc))
        return [(with_image_parts(prompt, images), response) for prompt, response in items]

    def score(
        self, engine: Any, shape: Shape, items: list[Any], batch_size: int
    ) -> tuple[list[dict[str, Any] | Rejected], tuple[int, int]]:
        """The reward columns of each row (as the reward kind writes them); the token counts are the
        real lengths, each sequence being its own row (no shared prompt)."""
        groups = [engine.encode(its) for its in items]
        outputs = engine.grouped_outputs(groups, batch_size)
        lengths = [len(e.ids) for g in groups for e in g]
        cols: list[dict[str, Any] | Rejected] = [
            self.columns(engine, shape, outs, enc) for outs, enc in zip(outputs, groups)
        ]
        return cols, (sum(lengths), sum(lengths))


def _processor_source(path: Path, target: Any, spec: Any) -> str:
    """Where the image processor's settings are: the model folder when it holds them, else (a run's
    model saved with its tokenizer only) the base model the run trained from."""
    if spec is None or any((path / name).is_file() for name in ("preprocessor_config.json", "processor_config.json")):
        return str(path)
    from rmspec.packaged import resolve_model_path

    base_dir = getattr(getattr(target, "loaded_spec", None), "base_dir", None)
    return resolve_model_path(spec.model.name_or_path, base_dir)


def load_vision_engine(
    model_dir: str | Path,
    *,
    dtype: str = "float32",
    device: str | None = None,
    batch_size: int | None = None,
    target: Any = None,
    spec: Any = None,
) -> VisionRewardEngine:
    """The model (rmspec.vision.models.reward_class of its config), its tokenizer and the processor
    training used (rmspec.vision.processor, no torchvision needed), offline; `spec` (a run's) gives
    the layout, chat template and max_length it trained with."""
    import torch
    from transformers import AutoConfig, AutoTokenizer

    from rmspec.errors import RmspecError
    from rmspec.inference.encoding import make_layout
    from rmspec.inference.loading import max_length_for, prepare_tokenizer
    from rmspec.vision.models import reward_class
    from rmspec.vision.processor import image_text, load_processor

    path = Path(model_dir)
    try:
        config = AutoConfig.from_pretrained(str(path))
        model = reward_class(config).from_pretrained(str(path), dtype=getattr(torch, dtype))
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        processor = load_processor(_processor_source(path, target, spec), tokenizer)
    except (OSError, ValueError) as exc:
        raise RmspecError(
            f"cannot load a vision-language reward model from {model_dir}: {exc}",
            "the folder needs config.json, weights, the tokenizer and the processor's settings (processor_config.json)",
        ) from None
    from rmspec.inference.ensemble import attach_ensemble

    # An ensemble's members (approach.ensemble), as for text: outputs become [reward, member_1..member_N].
    model.rmspec_ensemble_members = attach_ensemble(model, path)
    prepare_tokenizer(tokenizer, model)
    model.eval()
    if device:
        model.to(device)
    chat_template = spec.data.mapping.chat_template if spec is not None else "auto"
    architecture = spec.model.shape.architecture if spec is not None and spec.model.shape else None
    limit = max_length_for(model, tokenizer)
    return VisionRewardEngine(
        model,
        processor,
        min(spec.training.max_length, limit) if spec is not None else limit,
        make_layout(tokenizer, chat_template, architecture, pictures=True),
        image_text(config, processor),
        labels=_head_labels(config),
        mean=_finite(getattr(config, "reward_mean", None)),
        std=_finite(getattr(config, "reward_std", None)),
        target=target,
        batch_size=batch_size or (spec.eval.batch_size if spec is not None else 8),
    )


KIND = VisionRewardKind()
