"""Images through the data stage: every kind of bad image leaves as a reject with its reason and the
row's file:line, counted in the data report; good rows keep references that decode to the very
pixels given; the rlaif-v preset reads a Parquet file of datasets Image features."""

from __future__ import annotations

import base64
import io
from collections import Counter

from PIL import Image

from helpers.data import bert_tokenizer, make_spec, read_jsonl, write_jsonl
from rmspec.data import prepare
from rmspec.vision.images import decode_image
from rmspec.vision.marks import PICTURE


def png(colour, size=(16, 16)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def parts(text: str, images: int = 1) -> list[dict]:
    content = [{"type": "image"} for _ in range(images)] + [{"type": "text", "text": text}]
    return [{"role": "user", "content": content}]


def test_bad_images_are_rejected_by_reason_at_their_line(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "red.png").write_bytes(png((255, 0, 0)))
    (tmp_path / "img" / "cut.png").write_bytes(png((0, 0, 255), (64, 64))[:60])
    (tmp_path / "img" / "empty.png").write_bytes(b"")
    (tmp_path / "img" / "text.png").write_bytes(b"hello")
    big = io.BytesIO()
    Image.new("1", (9000, 9000)).save(big, format="PNG")  # 81 Mpx, a few kB: over the 64 Mpx limit
    rows = [
        ({"prompt": parts("What colour is it?"), "chosen": "red", "rejected": "blue", "images": ["img/red.png"]}, None),
        (
            {"prompt": "<image>Which colour?", "chosen": "green", "rejected": "red", "images": [uri(png((0, 255, 0)))]},
            None,
        ),
        ({"prompt": parts("Colour?"), "chosen": "a", "rejected": "b", "images": ["img/none.png"]}, "image_missing"),
        ({"prompt": parts("Colour?"), "chosen": "c", "rejected": "d", "images": ["img/cut.png"]}, "image_truncated"),
        ({"prompt": parts("Colour?"), "chosen": "e", "rejected": "f", "images": ["img/empty.png"]}, "image_zero_size"),
        ({"prompt": parts("Colour?"), "chosen": "g", "rejected": "h", "images": ["img/text.png"]}, "image_undecodable"),
        (
            {"prompt": parts("Two?"), "chosen": "i", "rejected": "j", "images": ["img/red.png", "img/red.png"]},
            "image_count_mismatch",
        ),
        (
            {"prompt": parts("Colour?"), "chosen": "k", "rejected": "l", "images": ["https://x.org/a.png"]},
            "image_url_refused",
        ),
        (
            {"prompt": parts("Colour?"), "chosen": "m", "rejected": "n", "images": [uri(big.getvalue())]},
            "image_too_many_pixels",
        ),
        (
            {"prompt": "No placeholder", "chosen": "o", "rejected": "p", "images": ["img/red.png"]},
            "image_count_mismatch",
        ),
    ]
    write_jsonl(tmp_path / "pairs.jsonl", [r for r, _ in rows])
    loaded = make_spec(
        tmp_path, {"source": {"kind": "files", "paths": ["pairs.jsonl"]}, "mapping": {"preset": "pairs"}}
    )
    rejects = tmp_path / "out" / "rejects.jsonl"
    prepared = prepare(loaded, bert_tokenizer(), rejects_path=rejects, cache_dir=tmp_path / "cache")
    lines = read_jsonl(rejects)
    assert {line["source_index"]: line["reason"] for line in lines} == {i: r for i, (_, r) in enumerate(rows) if r}
    data_file = str(tmp_path / "pairs.jsonl")
    for line in lines:
        assert line["detail"].startswith(f"{data_file}:{line['source_index'] + 1}: ")
        assert ("image part(s)" if line["reason"] == "image_count_mismatch" else ": images[0]: ") in line["detail"]
    report = prepared.report.to_json()
    assert report["rejected"] == dict(Counter(r for _, r in rows if r))
    assert len(prepared.train) == 2
    kept = prepared.train.to_list()
    # The conversation's image part became a placeholder; the references decode to the pixels given.
    assert kept[0]["prompt_messages"][0]["content"] == PICTURE + "What colour is it?"
    assert kept[0]["images"] == [str((tmp_path / "img" / "red.png").resolve())]
    assert decode_image(kept[0]["images"][0]).getpixel((3, 3)) == (255, 0, 0)
    assert decode_image(kept[1]["images"][0]).getpixel((3, 3)) == (0, 255, 0)


def test_rlaif_v_preset_reads_image_features_from_parquet(tmp_path):
    import datasets

    rows = {
        "image": [{"bytes": png((255, 0, 0)), "path": None}, {"bytes": b"not a png", "path": None}],
        "question": ["What colour is the picture?", "And this one?"],
        "chosen": ["The picture is red.", "It is blue."],
        "rejected": ["The picture is blue.", "It is red."],
    }
    features = datasets.Features(
        {
            "image": datasets.Image(decode=False),
            **{k: datasets.Value("string") for k in ("question", "chosen", "rejected")},
        }
    )
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(tmp_path / "rlaif.parquet"))
    loaded = make_spec(
        tmp_path, {"source": {"kind": "files", "paths": ["rlaif.parquet"]}, "mapping": {"preset": "rlaif-v"}}
    )
    rejects = tmp_path / "out" / "rejects.jsonl"
    prepared = prepare(loaded, bert_tokenizer(), rejects_path=rejects, cache_dir=tmp_path / "cache")
    (line,) = read_jsonl(rejects)
    assert line["reason"] == "image_undecodable"
    assert line["row"]["image"]["bytes"] == "<9 bytes>"  # named by its size, not dumped
    (kept,) = prepared.train.to_list()
    assert kept["prompt_messages"] == [{"role": "user", "content": PICTURE + "What colour is the picture?"}]
    assert decode_image(kept["images"][0]).getpixel((0, 0)) == (255, 0, 0)


def test_an_approach_that_cannot_take_images_is_refused_with_the_reason(tmp_path):
    import pytest

    from rmspec.errors import DataError

    (tmp_path / "red.png").write_bytes(png((255, 0, 0)))
    row = {"prompt": parts("Colour?"), "responses": ["red", "blue"], "scores": [1.0, 0.0], "images": ["red.png"]}
    write_jsonl(tmp_path / "lists.jsonl", [row])
    loaded = make_spec(
        tmp_path,
        {"source": {"kind": "files", "paths": ["lists.jsonl"]}, "mapping": {"columns": {"prompt": "prompt"}}},
        approach={"kind": "listwise"},
    )
    with pytest.raises(DataError) as caught:
        prepare(loaded, bert_tokenizer(), rejects_path=tmp_path / "rejects.jsonl", cache_dir=tmp_path / "cache")
    assert "does not train on images" in caught.value.message and "listwise" in caught.value.message
    assert caught.value.exit_code == 2
    # the hint names kinds that train on images (listwise's defaults do not) and the text-only way
    assert "to train on images write approach kind: " in caught.value.hint and "without its images" in caught.value.hint


def test_pictures_read_as_stored_are_counted_and_said_in_the_report(tmp_path):
    """A JPEG whose EXIF says to rotate it and a PNG with transparency are kept and read as stored (the pixels
    Pillow's RGB gives), but counted in the data report's images section and said in a note, since vLLM and
    transformers' load_image would read them otherwise (docs/multimodal.md); plain pictures leave no note."""
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    rotated = io.BytesIO()
    Image.new("RGB", (20, 10), (0, 0, 255)).save(rotated, format="JPEG", exif=exif.tobytes())
    see_through = io.BytesIO()
    Image.new("RGBA", (16, 16), (255, 0, 0, 0)).save(see_through, format="PNG")
    rows = [
        {"prompt": parts("Colour?"), "chosen": "a", "rejected": "b", "images": [uri(rotated.getvalue())]},
        {"prompt": parts("Colour?"), "chosen": "c", "rejected": "d", "images": [uri(see_through.getvalue())]},
        {"prompt": parts("Colour?"), "chosen": "e", "rejected": "f", "images": [uri(png((0, 255, 0)))]},
    ]

    def report_of(name: str, kept: list[dict]) -> dict:
        write_jsonl(tmp_path / f"{name}.jsonl", kept)
        loaded = make_spec(
            tmp_path, {"source": {"kind": "files", "paths": [f"{name}.jsonl"]}, "mapping": {"preset": "pairs"}}
        )
        return prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / f"cache-{name}").report.to_json()

    report = report_of("mixed", rows)
    assert report["rows_kept"] == 3
    assert report["images"]["read_as_stored"] == {"exif_rotation": 1, "transparency": 1}
    (note,) = [n for n in report["notes"] if n.startswith("images:")]
    assert (
        "1 with an EXIF rotation, 1 with transparency, read as stored" in note and "rotate or flatten the files" in note
    )
    plain = report_of("plain", rows[2:])
    assert "read_as_stored" not in plain["images"] and not any(n.startswith("images:") for n in plain["notes"])
