"""A prompt cut (max_length, truncate_prompt_left) that reaches any of a row's pictures rejects the row
(``image_cut``), the first of two included (issue 52: `image_cut` was tested with one picture only, so
a stage that kept a row while one picture was left passed).

The independent computation: the tokens before each picture, counted with the tokenizer on the text
the chat template writes there, and the cut sized from the row's full length in the data report.
"""

from __future__ import annotations

import json

import pytest
from PIL import Image

from helpers.data import make_spec, write_jsonl

FIRST, MIDDLE, LAST = "Look at the first picture", " and then at the second one", ": which of them is red?"


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    """A tiny Qwen2-VL folder as the data stage reads it: processor, tokenizer and config (no weights)."""
    from rmspec.vision.tiny import build_processor, tiny_config

    folder = tmp_path_factory.mktemp("vlm") / "tiny-vlm"
    processor = build_processor()
    processor.save_pretrained(folder)
    tiny_config(processor.tokenizer).save_pretrained(folder)
    return folder


def _prepare(tmp_path, model_dir, max_length: int, policy: str = "truncate_prompt_left"):
    from transformers import AutoTokenizer

    from rmspec.data import prepare

    for name, colour in (("red", (210, 10, 10)), ("blue", (10, 10, 210))):
        Image.new("RGB", (64, 64), colour).save(tmp_path / f"{name}.png")
    content = [
        {"type": "text", "text": FIRST},
        {"type": "image"},
        {"type": "text", "text": MIDDLE},
        {"type": "image"},
        {"type": "text", "text": LAST},
    ]
    row = {"prompt": [{"role": "user", "content": content}], "chosen": "The first.", "rejected": "The second."}
    write_jsonl(tmp_path / "pairs.jsonl", [{**row, "images": ["red.png", "blue.png"]}])
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["pairs.jsonl"]},
            "mapping": {"preset": "pairs"},
            "filters": [{"kind": "max_length", "policy": policy}],
        },
        max_length=max_length,
        extra={"model": {"name_or_path": str(model_dir)}},
    )
    rejects = tmp_path / f"rejects-{max_length}.jsonl"
    try:
        prepared = prepare(
            loaded,
            AutoTokenizer.from_pretrained(model_dir),
            rejects_path=rejects,
            cache_dir=tmp_path / f"c{max_length}",
        )
    except Exception as exc:  # the only row rejected: the rejects file says why
        if "no training rows" not in str(exc):
            raise
        prepared = None
    lines = [json.loads(x) for x in rejects.read_text().splitlines()] if rejects.exists() else []
    return prepared, lines


def test_a_cut_through_the_first_of_two_pictures_rejects_the_row(tmp_path, vlm):
    from transformers import AutoTokenizer

    full, rejects = _prepare(tmp_path, vlm, 4096)
    assert rejects == [] and len(full.train) == 1
    lengths = full.report.to_json()["token_lengths"]
    longest = int(max(lengths["chosen_sequence"]["max"], lengths["rejected_sequence"]["max"]))  # visual tokens in
    tok = AutoTokenizer.from_pretrained(vlm)
    before = len(tok("user\n" + FIRST, add_special_tokens=False)["input_ids"])  # all a cut may take

    kept, rejects = _prepare(tmp_path, vlm, longest - before)  # the words before the first picture: cut
    assert rejects == [] and len(kept.train) == 1 and kept.report.truncation_rate == 1.0
    assert (
        max(len(kept.train[0]["chosen_input_ids"]), len(kept.train[0]["rejected_input_ids"]))
        == max(len(full.train[0]["chosen_input_ids"]), len(full.train[0]["rejected_input_ids"])) - before
    )

    cut, rejects = _prepare(tmp_path, vlm, longest - before - 1)  # one token into the first picture
    assert cut is None and [r["reason"] for r in rejects] == ["image_cut"], rejects
    assert "cuts 1 of the prompt's 2 image(s)" in rejects[0]["detail"]
    assert "raise training.max_length" in rejects[0]["detail"]
