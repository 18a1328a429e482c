"""A row's pictures are part of its identity (issue 47 item 3): the split's prompt groups, `dedup`'s
hashes and the data report's exact-duplicates figure read the prompt's text and its pictures' content
(rmspec.data.identity), so rows that ask one question about different pictures are different prompts
and different rows, while true duplicates (same text, same picture) still are duplicates.

The independent computations: the pictures' bytes hashed here with hashlib, a text prompt's key as the
old formula wrote it (sha1 of its turns), and the split's counts from the fraction.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json

import pytest
from PIL import Image

from helpers.data import make_spec, write_jsonl
from rmspec.data.identity import picture_digest, prompt_key, row_key
from rmspec.spec.row_kinds import RowKind

QUESTION = "What colour is the picture?"


def _png(colour: tuple[int, int, int], size: int = 8) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    """The tiny Qwen2-VL folder as the data stage reads it: processor, tokenizer and config (no weights)."""
    folder = tmp_path_factory.mktemp("vlm") / "tiny-vlm"
    _weightless_vlm(folder)
    return folder


def _weightless_vlm(folder):
    from rmspec.vision.tiny import build_processor, tiny_config

    processor = build_processor()
    processor.save_pretrained(folder)
    tiny_config(processor.tokenizer).save_pretrained(folder)


def _prepare(folder, model_dir, rows, split=None, filters=None):
    from transformers import AutoTokenizer

    from rmspec.data import prepare

    write_jsonl(folder / "rows.jsonl", rows)
    data = {"source": {"kind": "files", "paths": ["rows.jsonl"]}, "mapping": {"preset": "pairs"}}
    if split is not None:
        data["split"] = split
    if filters is not None:
        data["filters"] = filters
    loaded = make_spec(folder, data, max_length=128, extra={"model": {"name_or_path": str(model_dir)}})
    return prepare(loaded, AutoTokenizer.from_pretrained(model_dir), cache_dir=folder / "cache")


def _row(i: int, picture: str, question: str = QUESTION, chosen: str = "Red.", rejected: str = "Blue.") -> dict:
    content = [{"type": "image"}, {"type": "text", "text": question}]
    return {
        "id": f"r{i}",
        "prompt": [{"role": "user", "content": content}],
        "chosen": chosen,
        "rejected": rejected,
        "images": [picture],
    }


# ---------------------------------------------------------------- the function


def test_a_picture_is_identified_by_its_bytes_as_a_path_or_inline(tmp_path):
    red, blue = _png((200, 0, 0)), _png((0, 0, 200))
    (tmp_path / "red.png").write_bytes(red)
    (tmp_path / "red-again.png").write_bytes(red)
    inline = "data:image;base64," + base64.b64encode(red).decode()
    labelled = "data:image/png;base64," + base64.b64encode(red).decode()
    expected = hashlib.sha256(red).hexdigest()[:32]
    assert picture_digest(str(tmp_path / "red.png")) == expected
    assert picture_digest(str(tmp_path / "red-again.png")) == expected  # same bytes, other name: one picture
    assert picture_digest(inline) == picture_digest(labelled) == expected  # inline, whatever its MIME label
    assert picture_digest("data:image;base64," + base64.b64encode(blue).decode()) != expected

    def record(ref):
        return {"prompt_messages": [{"role": "user", "content": "\ufffc" + QUESTION}], "images": [ref]}

    assert prompt_key(record(str(tmp_path / "red.png"))) == prompt_key(record(inline))
    assert prompt_key(record(str(tmp_path / "red.png"))) != prompt_key(
        record("data:image;base64," + base64.b64encode(blue).decode())
    )


def test_a_text_prompt_keeps_the_key_it_always_had():
    """Text data splits and de-duplicates exactly as before: the key of a prompt without pictures is the
    old formula's (sha1 of its turns' role and stripped text), tool parts included."""
    msgs = [
        {"role": "system", "content": " Be brief. "},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "calc", "arguments": "2+2"}]},
    ]
    turns = [
        ["system", "Be brief."],
        ["user", "What is 2+2?"],
        ["assistant", "", {"tool_calls": msgs[2]["tool_calls"]}],
    ]
    old = hashlib.sha1(json.dumps(turns, ensure_ascii=False).encode()).hexdigest()[:20]
    assert prompt_key({"prompt_messages": msgs}) == old
    assert prompt_key({"prompt_messages": msgs, "images": []}) == old
    batch = {"prompt_key": [old], "chosen": ["4"], "rejected": ["5"]}
    assert (
        row_key(batch, 0, "row", RowKind.PAIRS) == hashlib.sha1(json.dumps([old, "4", "5"]).encode()).hexdigest()[:20]
    )


# ---------------------------------------------------------------- split


def test_a_one_question_vlm_set_splits_at_its_fraction(tmp_path, tiny_vlm):
    """600 rows, one question, 600 different pictures: 600 prompts, a tenth of them held out (the old
    text-only key made them one prompt, and the split held out nothing)."""
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    rows = []
    for i in range(600):
        (pictures / f"{i}.png").write_bytes(_png((i % 256, i // 256 * 60, 90)))
        rows.append(_row(i, f"pictures/{i}.png"))
    prepared = _prepare(tmp_path, tiny_vlm, rows, split={"validation_fraction": 0.1, "seed": 0})
    assert len(prepared.validation) == 60 and len(prepared.train) == 540
    train_pictures = {p for r in prepared.train for p in r["images"]}
    held_pictures = {p for r in prepared.validation for p in r["images"]}
    assert len(train_pictures | held_pictures) == 600 and not train_pictures & held_pictures


def test_rows_sharing_a_picture_and_a_question_stay_on_one_side(tmp_path, tiny_vlm):
    """Two answers pairs per picture (and per question): a prompt (text and picture) never lands on both sides."""
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    rows = []
    for i in range(40):
        (pictures / f"{i}.png").write_bytes(_png((i * 6, 20, 200 - i * 4)))
        rows.append(_row(2 * i, f"pictures/{i}.png", chosen="Red.", rejected="Blue."))
        rows.append(_row(2 * i + 1, f"pictures/{i}.png", chosen="It is red.", rejected="It is green."))
    prepared = _prepare(tmp_path, tiny_vlm, rows, split={"validation_fraction": 0.25, "seed": 1})
    side = {}
    for name, part in (("train", prepared.train), ("validation", prepared.validation)):
        for r in part:
            assert side.setdefault(r["images"][0], name) == name
    assert sum(1 for s in side.values() if s == "validation") == 10  # a quarter of the 40 prompts


# ---------------------------------------------------------------- dedup and the report


def test_the_multimodal_demo_has_no_false_duplicates(tmp_path, monkeypatch):
    """`rmspec init --example multimodal`'s data and spec (the tiny model's weights left out: the data
    stage reads its processor): a dedup filter drops none of its 320 rows, and the report's exact
    duplicates are 0 (they were 96.2%, and dedup dropped 296)."""
    from rmspec.data import prepare
    from rmspec.data.tokenizer import load_tokenizer
    from rmspec.render.data_view import print_report
    from rmspec.spec import load_spec
    from rmspec.vision import tiny
    from rmspec.vision.demo import write_demo

    monkeypatch.setattr(tiny, "build_tiny_vlm", _weightless_vlm)
    spec = write_demo(tmp_path / "multimodal", spec=tmp_path / "multimodal.yaml")
    for sets in ((), ("data.filters=[{kind: dedup}]",), ("data.filters=[{kind: dedup, on: prompt}]",)):
        loaded = load_spec(str(spec), sets)
        report = prepare(loaded, load_tokenizer(loaded), cache_dir=tmp_path / f"cache{len(sets)}").report.to_json()
        assert report["rows_read"] == report["rows_kept"] == 320, report["rejected"]
        assert report["duplicate_rate"] == 0.0
    from rich.console import Console

    console = Console(record=True, width=200)
    print_report(report, console=console)
    assert "exact duplicates  0.0%" in console.export_text()


def test_true_duplicates_are_still_dropped(tmp_path, tiny_vlm):
    """Same text and same picture (by path twice, and as the same bytes inline): duplicates; the same
    picture under another question, or the same question over another picture: not."""
    red, blue = _png((210, 10, 10)), _png((10, 10, 210))
    (tmp_path / "red.png").write_bytes(red)
    (tmp_path / "blue.png").write_bytes(blue)
    inline_red = "data:image/png;base64," + base64.b64encode(red).decode()
    rows = [
        _row(0, "red.png"),
        _row(1, "red.png"),  # the same row again: a duplicate of r0
        _row(2, inline_red),  # the same picture's bytes inline: a duplicate of r0
        _row(3, "blue.png"),  # another picture
        _row(4, "red.png", question="Is the picture bright?"),  # another question
        _row(5, "red.png", chosen="It is red."),  # another answer: the same prompt, another row
    ]
    by_row = _prepare(tmp_path, tiny_vlm, rows, filters=[{"kind": "dedup"}])
    assert sorted(r["id"] for r in by_row.train) == ["r0", "r3", "r4", "r5"]
    assert by_row.report.rejected == {"duplicate": 2}
    by_prompt = _prepare(tmp_path, tiny_vlm, rows, filters=[{"kind": "dedup", "on": "prompt"}])
    assert sorted(r["id"] for r in by_prompt.train) == ["r0", "r3", "r4"]
    plain = _prepare(tmp_path, tiny_vlm, rows)
    assert plain.report.duplicate_rate == round(1 - 4 / 6, 4)  # the report counts the same two rows


def test_a_conversation_row_key_reads_its_pictures(tmp_path):
    """Generative rows (whole conversations): the same turns over two pictures are two rows, over one
    picture one row; without pictures the key is the old formula's (turns and tool calls)."""
    red, blue = _png((200, 0, 0)), _png((0, 0, 200))
    turns = [{"role": "user", "content": "\ufffcWhat colour?"}, {"role": "assistant", "content": "Red."}]

    def batch(picture):
        refs = ["data:image/png;base64," + base64.b64encode(picture).decode()]
        key = prompt_key({"messages": turns, "images": refs})
        return {"prompt_key": [key], "messages": [turns], "tools": [""], "images": [refs]}

    assert row_key(batch(red), 0, "row", RowKind.MESSAGES) == row_key(batch(red), 0, "row", RowKind.MESSAGES)
    assert row_key(batch(red), 0, "row", RowKind.MESSAGES) != row_key(batch(blue), 0, "row", RowKind.MESSAGES)
    text = {"prompt_key": [prompt_key({"messages": turns})], "messages": [turns], "tools": [""], "images": [[]]}
    old = hashlib.sha1(json.dumps([[m["role"], m["content"]] for m in turns], ensure_ascii=False).encode()).hexdigest()[
        :20
    ]
    assert row_key(text, 0, "row", RowKind.MESSAGES) == old


def test_a_changed_picture_makes_the_prepared_data_cache_stale(tmp_path, tiny_vlm):
    """The cache is keyed by the data files; the pictures they name by path are part of the rows too:
    a picture rewritten since (here: made the same as another row's) is read again, and dedup sees it."""
    from transformers import AutoTokenizer

    from rmspec.data import prepare

    (tmp_path / "a.png").write_bytes(_png((200, 0, 0)))
    (tmp_path / "b.png").write_bytes(_png((0, 0, 200)))
    first = _prepare(tmp_path, tiny_vlm, [_row(0, "a.png"), _row(1, "b.png")], filters=[{"kind": "dedup"}])
    assert len(first.train) == 2 and not first.report.cached
    from rmspec.spec import load_spec

    loaded, tokenizer = load_spec(tmp_path / "spec.yaml"), AutoTokenizer.from_pretrained(tiny_vlm)
    again = prepare(loaded, tokenizer, cache_dir=tmp_path / "cache")
    assert again.report.cached and len(again.train) == 2  # nothing changed: the cache serves
    (tmp_path / "b.png").write_bytes(_png((200, 0, 0)))  # now the same picture as a.png
    changed = prepare(loaded, tokenizer, cache_dir=tmp_path / "cache")
    assert not changed.report.cached
    assert [r["id"] for r in changed.train] == ["r0"] and changed.report.rejected == {"duplicate": 1}
