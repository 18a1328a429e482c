"""A data source's images column, as the row mapper (rmspec.data.presets.RowMapper) reads it: refused for an
approach that does not train on images (validate refuses a mapped or preset images column:
rmspec.spec.image_rules; this is the backstop for an `images` column found in the data itself), else the
reader that decodes and checks each row's images before the row is mapped (rmspec.vision.rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec import approaches
from rmspec.errors import DataError
from rmspec.spec.image_rules import how_to_train_on_images
from rmspec.vision.rows import ImageSettings, RowImages


def row_images(
    where: str,
    column: str,
    approach: Any,
    image_options: Any,
    data_files: list[str],
    images_first: bool,
    placeholder: str | None = "<image>",
) -> RowImages:
    """The column's reader: relative paths resolve against the data file's folder; a bad image rejects the
    row at its file:line. `image_options` is the spec's data.images (None: the defaults; downloads off);
    `placeholder` the source's data.mapping.image_placeholder (where its prompts' text marks a picture)."""
    refusal = approaches.get(approach.kind).image_refusal(approach)
    if refusal is not None:
        raise DataError(
            f"{where}: the data has images (column {column!r}), but {refusal}",
            f"{how_to_train_on_images(approach)}; or map the data without its images",
        )
    settings = ImageSettings.of(
        image_options,
        base_dir=str(Path(data_files[0]).parent) if data_files else None,
        images_first=images_first,
        placeholder=placeholder,
    )
    return RowImages(column, settings)
