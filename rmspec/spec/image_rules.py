"""Images against the approach: `validate` refuses a spec whose data has images when its approach
(with its options) does not train on them, at the field that says so, with the approach's own reason.

Whether an approach trains on images is its declaration's answer (rmspec.approaches.base.Approach.
image_refusal), one layer above the spec. The registry cannot be imported from here, so the package
(rmspec/__init__.py, which loads the registry before anything reads a spec) hands the question down
through `use_image_refusal`, as the registry hands down its sections (rmspec.spec.root.use_sections).
The data stage asks the same question for an `images` column it finds on its own (rmspec.data.presets).

Yields (path, message, hint) like rmspec.spec.rules. Light: no torch, no Pillow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, get_args

from rmspec.spec import presets
from rmspec.spec.approach import SECTIONS, ApproachSection
from rmspec.spec.approach_rules import mappings
from rmspec.spec.base import Problem
from rmspec.spec.root import Spec

# Why the approach of this section cannot train on rows with images; None: it can.
ImageRefusal = Callable[[ApproachSection], "str | None"]
_ask: list[ImageRefusal] = []


def use_image_refusal(ask: ImageRefusal) -> None:
    """Where `refusal` asks (rmspec/__init__.py: each approach's declaration)."""
    _ask[:] = [ask]


def refusal(section: ApproachSection) -> str | None:
    """The approach's reason for refusing images with these options (None: it trains on them, or no
    registry has answered yet: then the data stage still refuses)."""
    return _ask[0](section) if _ask else None


def image_approaches(rows: str | None = None) -> list[str]:
    """The approach kinds that train on images with their default options (those training on `rows`
    only, when given), in the registry's order: what a hint tells the user to write."""
    kinds = []
    for section in SECTIONS:
        kind = get_args(section.model_fields["kind"].annotation)[0]
        default = section.model_construct(kind=kind)  # its defaults; required options unset
        try:
            if (rows is None or default.row_kind == rows) and refusal(default) is None:
                kinds.append(kind)
        except AttributeError:  # its answer reads a required option: no default to name it by
            continue
    return kinds


def said_images(spec: Spec) -> Iterator[tuple[tuple, str, str]]:
    """(path, what says the data has images, how to train on text instead) of every field that says so."""
    rows = spec.approach.row_kind
    for path, mapping in mappings(spec):
        column = mapping.columns.images
        preset = presets.get(mapping.preset)
        dotted = ".".join(map(str, path))
        if column is not None:
            yield (
                (*path, "columns", "images"),
                f"the data has images ({dotted}.columns.images: {column!r})",
                f"remove {dotted}.columns.images to train on the text alone",
            )
        # A preset that gives other rows is refused for that already (rmspec.spec.rules.approach_rules).
        elif preset is not None and "images" in preset.columns and presets.mismatch(mapping, rows) is None:
            yield (
                (*path, "preset"),
                f"the {preset.name} preset reads images (column {preset.columns['images']!r})",
                "map the text columns without a preset to train on the text alone",
            )
    if spec.data.images.model_fields_set:
        yield (("data", "images"), "data.images sets how images are read", "remove data.images")
    vision = spec.model.vision
    for option in ("min_pixels", "max_pixels"):
        if vision is not None and getattr(vision, option) is not None:
            yield (
                ("model", "vision", option),
                f"model.vision.{option} sizes the images training reads",
                f"remove model.vision.{option} (freeze and lora_on apply to text training too)",
            )
    if vision is not None and vision.image_processor:
        yield (
            ("model", "vision", "image_processor"),
            "model.vision.image_processor sets how the images training reads are processed",
            "remove model.vision.image_processor (freeze and lora_on apply to text training too)",
        )


def images_need_an_approach_that_reads_them(spec: Spec) -> Iterator[Problem]:
    said = list(said_images(spec))
    why = refusal(spec.approach) if said else None
    if why is None:
        return
    on_images = how_to_train_on_images(spec.approach)
    for path, what, text_only in said:
        yield (path, f"{what}, but {why}", f"{on_images}; or {text_only}")


def how_to_train_on_images(section: ApproachSection) -> str:
    """The hint's first half for a refused section (validate's, and the data stage's for an images column
    it finds): keep the kind when its defaults read images (an option refuses them), else the kinds that do."""
    if section.kind in image_approaches():
        return f"to train on images keep approach kind: {section.kind} and change the option the reason names"
    same_rows = image_approaches(section.row_kind)
    kinds = same_rows or image_approaches()
    return f"to train on images write approach kind: {' or '.join(kinds) or '(none registered)'}" + (
        "" if same_rows else " (with the data mapped for its rows)"
    )


def ask_declarations(registry: Any) -> ImageRefusal:
    """The question as the approach registry answers it (rmspec/__init__.py passes rmspec.approaches)."""
    return lambda section: registry.get(section.kind).image_refusal(section)
