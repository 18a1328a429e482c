"""Visual tokens per image measured with the run's own processor, for the families the Qwen2-VL rule
(rmspec.vision.tokens) does not cover: LLaVA, LLaVA-OneVision, Idefics3, SmolVLM, Gemma 3, ...

Data stage only (transformers and Pillow). The processor is loaded once per process
(rmspec.vision.processor.load_processor, as the collator loads it, model.vision's bounds included) and
asked what a row's image parts become with its images: ``added`` is the length of its output minus
the length of the bare image parts' text, ``visual`` the image tokens in it. Every family measured here
decides the expansion from the images' sizes alone (tests/test_vision_token_count.py checks it per
family with images of the same size and different content and colour mode), so the answer is kept per
tuple of the row's (width, height) and images are decoded only for sizes not seen before. Per row, not
per image: LLaVA-OneVision tiles an image only when it is its row's one image (two images in a row are
``num_image_tokens + 1`` each whatever their size). An image the processor refuses (an error of
any kind) is an ImageReject ``processor_refused``: the data stage rejects its row with that reason
instead of the collator crashing in training.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmspec.vision.images import ImageReject, decode_image
from rmspec.vision.marks import PICTURE
from rmspec.vision.tokens import ImageTokens, extra_positions, image_size

#: The processor's saved settings: the count's fingerprint reads them (the data cache re-prepares when they change).
SETTINGS_FILES = ("preprocessor_config.json", "processor_config.json")


@dataclass
class MeasuredCount:
    """The data stage's visual count for a model whose processor the light rule does not cover."""

    model_dir: str
    model_type: str
    tokenizer: Any  # the run's: the processor is built over it, as the collator's is
    image_text: str
    min_pixels: int | None = None
    max_pixels: int | None = None
    image_token_id: int | None = None  # config.json's: the positions the model fills with image features
    placeholder: str = PICTURE  # a picture's place in the decoded prompt (rmspec.vision.marks)
    image_processor: dict[str, Any] | None = None  # model.vision.image_processor: the processor's own settings
    _processor: Any = field(default=None, init=False, repr=False, compare=False)
    _sizes: dict[tuple[tuple[int, int], ...], ImageTokens | ImageReject] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __repr__(self) -> str:  # the data cache's key (source_stage.Context.tokenizer_key): what changes the count
        digest = hashlib.sha256()
        for name in SETTINGS_FILES:
            path = Path(self.model_dir) / name
            digest.update(path.read_bytes() if path.is_file() else b"-")
        return (
            f"MeasuredCount({self.model_type!r}, {self.image_text!r}, min_pixels={self.min_pixels}, "
            f"max_pixels={self.max_pixels}, image_processor={json.dumps(self.image_processor, sort_keys=True)}, "
            f"settings={digest.hexdigest()[:16]})"
        )

    def __getstate__(self) -> dict[str, Any]:  # datasets' worker processes load their own processor
        return {**self.__dict__, "_processor": None}

    @property
    def processor(self) -> Any:
        if self._processor is None:
            from rmspec.vision.processor import load_processor

            self._processor = load_processor(
                self.model_dir, self.tokenizer, self.min_pixels, self.max_pixels, self.image_processor
            )
        return self._processor

    def row_tokens(self, refs: list[str]) -> ImageTokens:
        """A row's images, measured together: LLaVA-OneVision tiles an image (any-resolution) only
        when it is its row's one image, so the count is kept per tuple of the row's sizes."""
        sizes = tuple(image_size(ref) for ref in refs)
        if sizes not in self._sizes:
            self._sizes[sizes] = self.measure([decode_image(ref) for ref in refs], sizes)
        found = self._sizes[sizes]
        if isinstance(found, ImageReject):
            raise found
        return found

    def image_tokens(self, ref: str) -> ImageTokens:
        """One image as its row's only image."""
        return self.row_tokens([ref])

    def measure(self, images: list[Any], sizes: tuple[tuple[int, int], ...]) -> ImageTokens | ImageReject:
        """The row's image parts with its ``images``, through the processor, against the bare parts' tokens."""
        processor = self.processor
        parts = self.image_text * len(images)
        try:
            ids = list(processor(text=[parts], images=[images])["input_ids"][0])
        except Exception as exc:  # noqa: BLE001 - any refusal of the processor's: the row's reason, not a crash
            where = "images[0] " if len(sizes) == 1 else "images "
            shown = ", ".join(f"{w}x{h}" for w, h in sizes)
            return ImageReject("processor_refused", f"{where}{shown}: {type(exc).__name__}: {exc}")
        bare = processor.tokenizer(parts)["input_ids"]
        # The config's id, not always the processor's: Gemma 3's processor image_token is its boi token.
        token = self.image_token_id if self.image_token_id is not None else getattr(processor, "image_token_id", None)
        if token is None:
            token = processor.tokenizer.convert_tokens_to_ids(processor.image_token)
        return ImageTokens(visual=ids.count(token), added=len(ids) - len(bare))

    def per_image(self, refs: list[str]) -> list[int]:
        return [self.image_tokens(ref).visual for ref in refs]

    def extra(
        self, prompt_texts: list[str], prompt_lengths: list[int], refs: list[list[str]], encode: Any
    ) -> list[int]:
        return extra_positions(self, prompt_texts, prompt_lengths, refs, encode)[0]

    def describe(self) -> dict[str, Any]:
        """The data report's ``processor`` entry for this count."""
        return {
            "counted_by": "processor",
            "model_type": self.model_type,
            "min_pixels": self.min_pixels,
            "max_pixels": self.max_pixels,
            **({"image_processor": self.image_processor} if self.image_processor else {}),
        }
