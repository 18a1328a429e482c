"""`data.images`: how the data stage reads and checks the rows' images (every dataset of the spec).

Which column holds a row's images is the mapping's (`data.mapping.columns.images`, or a preset such
as rlaif-v); this section says where images may come from and how large one may be. The data stage
hands it to rmspec.vision.rows.ImageSettings; rmspec.vision.images checks every image against it.
"""

from __future__ import annotations

from pydantic import Field, PositiveFloat

from rmspec.spec.base import Section

# The limits' defaults, as rmspec.vision.images holds them in pixels and bytes (not imported: the spec is
# below rmspec.vision; tests/test_vision_urls.py keeps the two equal). They are also the most a spec may
# write: training decodes the kept images again with rmspec.vision.images' defaults (rmspec.vision.collate).
DEFAULT_MAX_MEGAPIXELS = 64.0
DEFAULT_MAX_MB = 32.0
DEFAULT_DOWNLOAD_TIMEOUT = 30.0


class ImagesSpec(Section):
    allow_urls: bool = Field(
        False,
        description="Download images given as http(s) URLs, once, in the data stage: the bytes that came are "
        "checked as a local file's are and kept in the prepared rows (training never downloads). A failed "
        "download (an HTTP error, a timeout, a refused connection) rejects the row as image_download_failed. "
        "Off: a row with a URL is rejected as image_url_refused (download the images and give their paths).",
    )
    download_timeout: PositiveFloat = Field(
        DEFAULT_DOWNLOAD_TIMEOUT,
        description="With allow_urls: seconds one download may take in all, from connecting to the last byte, "
        "redirects included (a server that sends a byte a second is cut off); a slower one is "
        "image_download_failed.",
    )
    max_mb: PositiveFloat = Field(
        DEFAULT_MAX_MB,
        le=DEFAULT_MAX_MB,
        description="Largest encoded image, in MiB (a file, a data: URI, bytes or a download); a larger one is "
        "image_too_many_bytes. A download stops reading past it. At most 32: training decodes the kept images "
        "again under that limit.",
    )
    max_megapixels: PositiveFloat = Field(
        DEFAULT_MAX_MEGAPIXELS,
        le=DEFAULT_MAX_MEGAPIXELS,
        description="Largest image, in millions of pixels (width x height, read from the header before any pixel "
        "is decoded: a decompression bomb never expands); a larger one is image_too_many_pixels. At most 64: "
        "training decodes the kept images again under that limit. model.vision.max_pixels is another thing: the "
        "size the processor resizes a kept image to.",
    )

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 1024 * 1024)

    @property
    def max_pixels(self) -> int:
        return int(self.max_megapixels * 1_000_000)
