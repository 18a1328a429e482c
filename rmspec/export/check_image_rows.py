"""The rows `rmspec export --to vllm --check` sends for a vision-language reward model: conversations with their
pictures, to vLLM as `messages` with OpenAI `image_url` parts (`data:` URIs) and to `rmspec score` as the same
prompt with `{"type": "image"}` parts and an `images` column.

By default, the run's held-out split (rmspec.export.check_rows.validation_folder): both responses of pairs spread
evenly over it, the picture marks of `prompt_messages` (rmspec.vision.marks.PICTURE) turned back into image parts
and the row's `images` (data URIs as the data stage keeps them; a file path is read and sent as a data URI) in
order. `--check-rows FILE`: `rmspec score`'s rows with an `images` column (paths relative to the file).
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.export.check_rows import CheckRow, CheckRows, read_jsonl_rows, spread, validation_folder

IMAGE_ROWS_HINT = (
    'pass --check-rows FILE (JSONL rows {"prompt": [{"role": "user", "content": [{"type": "image"}, {"type": '
    '"text", "text": ...}]}], "response": ..., "images": [PATH or data: URI]})'
)


@dataclass(frozen=True)
class ImageCheckRow(CheckRow):
    """A check row whose prompt holds image parts, and its pictures as data URIs, in order."""

    images: tuple[str, ...] = ()

    def score_row(self) -> dict[str, Any]:
        return {"prompt": self.messages, "response": self.response, "images": list(self.images)}

    def vllm_messages(self) -> list[dict[str, Any]]:
        """The conversation as an OpenAI client sends it: each image part an `image_url` with its picture."""
        pictures = iter(self.images)
        out: list[dict[str, Any]] = []
        for message in self.messages:
            content = message["content"]
            if isinstance(content, list):
                content = [
                    {"type": "image_url", "image_url": {"url": next(pictures)}} if part.get("type") == "image" else part
                    for part in content
                ]
            out.append({"role": message["role"], "content": content})
        return [*out, {"role": "assistant", "content": self.response}]


def data_uri(ref: str, base: Path) -> str:
    """A picture reference as a data URI (a data URI as it is; a path read, relative to `base`)."""
    if ref.startswith("data:"):
        return ref
    path = Path(ref) if Path(ref).is_absolute() else base / ref
    if not path.is_file():
        raise RmspecError(f"check row picture {ref}: no such file (relative to {base})", IMAGE_ROWS_HINT)
    kind = mimetypes.guess_type(path.name)[0] or "image/png"
    return f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode()


def with_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages whose text holds picture marks, with each mark an image part (the text around it text parts)."""
    from rmspec.vision.marks import PICTURE

    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str) and PICTURE in content:
            parts: list[dict[str, Any]] = []
            for n, piece in enumerate(content.split(PICTURE)):
                if n:
                    parts.append({"type": "image"})
                if piece:
                    parts.append({"type": "text", "text": piece})
            content = parts
        out.append({"role": message["role"], "content": content})
    return out


def image_check_rows(target: Path, rows_file: Path | None, limit: int) -> CheckRows:
    """--check-rows FILE, else the run's held-out split, for a vision-language reward model."""
    if rows_file is not None:
        given: list[CheckRow] = list(read_image_rows(rows_file)[:limit])
        return CheckRows(given, f"{rows_file} (first {len(given)} rows)")
    if not (target.is_dir() and (target / "spec.yaml").is_file()):
        raise RmspecError(f"{target}: a model folder has no held-out rows with pictures", IMAGE_ROWS_HINT)
    import datasets

    folder = validation_folder(target)
    split = datasets.load_from_disk(str(folder))
    if "prompt_messages" not in split.column_names or "images" not in split.column_names:
        raise RmspecError(f"{folder}: the split keeps no conversations with pictures", IMAGE_ROWS_HINT)
    sides = [s for s in ("chosen", "rejected") if s in split.column_names] or ["response"]
    indices = [i for i, refs in enumerate(split["images"]) if refs]
    base = target / "spec.yaml"
    rows: list[CheckRow] = []
    for i in spread(len(indices), -(-limit // len(sides))):
        record = split[indices[i]]
        messages = with_parts([{"role": m["role"], "content": m["content"]} for m in record["prompt_messages"]])
        pictures = tuple(data_uri(ref, base.parent) for ref in record["images"])
        for side in sides:
            rows.append(ImageCheckRow(messages, record[side], id=str(record.get("id", i)), side=side, images=pictures))
    rows = rows[:limit]
    if not rows:
        raise RmspecError(f"{target}: the validation split ({folder}) has no rows with pictures", IMAGE_ROWS_HINT)
    return CheckRows(rows, f"the run's validation split ({folder}): {len(rows)} rows with pictures")


def read_image_rows(path: Path) -> list[ImageCheckRow]:
    def build(row: dict, n: int) -> ImageCheckRow:
        prompt = row["prompt"]
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        images = row.get("images") or []
        pictures = tuple(data_uri(ref, path.parent) for ref in ([images] if isinstance(images, str) else images))
        return ImageCheckRow(with_parts(messages), row["response"], id=str(row.get("id", n)), images=pictures)

    return read_jsonl_rows(path, build, what="a check row", hint=IMAGE_ROWS_HINT, empty_hint=IMAGE_ROWS_HINT)
