"""Prompt-once packing with M-RoPE equals the unpacked two-sequence forward: rewards, the Bradley-Terry
loss and every gradient within 1e-5 on the same batch (images of different sizes, so different
visual token counts and grids; rows with 0, 1 and 3 pictures, so each row's grids are its own);
naive 1-D positions in the same packed rows are caught. A picture's place is the data stage's
picture id (rmspec.vision.marks); a literal `<image>` in a reply is text, and such a pair packs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from rmspec.train.vision_packing import VisionPackedPairCollator, packed_vision_pair_rewards
from rmspec.vision.collate import VisionEncoder, VisionPairCollator
from rmspec.vision.marks import PICTURE_ID
from rmspec.vision.models import reward_class
from rmspec.vision.processor import image_text
from rmspec.vision.tiny import build_processor, tiny_config

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("imgs")
    processor = build_processor(max_pixels=28 * 28 * 16)
    config = tiny_config(processor.tokenizer)
    torch.manual_seed(0)
    model = reward_class(config)(config).train()
    with torch.no_grad():
        model.score.weight.normal_()
    sizes = [(64, 64), (112, 56), (56, 84)]
    ids = lambda text: processor.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    paths = []
    for k, (w, h) in enumerate(sizes):
        path = folder / f"{k}.png"
        Image.effect_noise((w, h), 60).convert("RGB").save(path)
        paths.append(str(path))

    def row(k, pictures, chosen, rejected):
        # as the data stage writes it: each picture's place the one id PICTURE_ID
        prompt = ids("<|im_start|>user\n") + [PICTURE_ID] * len(pictures) + ids(f"Describe picture {k}.<|im_end|>\n")
        prompt += ids("<|im_start|>assistant\n")
        return {
            "chosen_input_ids": prompt + ids(chosen + "<|im_end|>\n"),
            "rejected_input_ids": prompt + ids(rejected + "<|im_end|>\n"),
            "images": pictures,
            "margin": 0.0,
        }

    rows = [row(k, [paths[k]], f"A noisy picture, {k} of them.", "Nothing.") for k in range(3)]
    mixed = [
        row(0, [], "No picture; the `<image>` tag is text here.", "Nothing."),
        row(1, [paths[1]], "Use the <image> element.", "A <image> reply that differs."),
        row(2, [paths[2], paths[0], paths[1]], "Three noisy pictures.", "Nothing at all."),
    ]
    encoder = VisionEncoder(processor, image_text(config, processor))
    return model, encoder, rows, mixed


def unpacked(model, batch):
    scores = model(**{k: v for k, v in batch.items() if k not in ("margin",)}).logits[:, 0]
    half = scores.shape[0] // 2
    return scores[:half], scores[half:]


def loss_and_grads(model, rewards):
    model.zero_grad()
    chosen, rejected = rewards
    loss = -F.logsigmoid(chosen - rejected).mean()
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return chosen.detach(), rejected.detach(), loss.detach(), grads


def test_packed_equals_unpacked_and_the_image_is_encoded_once(setup):
    model, encoder, rows, _ = setup
    plain = VisionPairCollator(encoder)(rows)
    packed = VisionPackedPairCollator(encoder)(rows)
    # The vision tower sees each image once packed, twice unpacked.
    assert packed["pixel_values"].shape[0] * 2 == plain["pixel_values"].shape[0]
    c0, r0, l0, g0 = loss_and_grads(model, unpacked(model, plain))
    c1, r1, l1, g1 = loss_and_grads(model, packed_vision_pair_rewards(model, packed))
    assert torch.allclose(c0, c1, atol=1e-5) and torch.allclose(r0, r1, atol=1e-5)
    assert abs(l0.item() - l1.item()) < 1e-5
    assert set(g0) == set(g1) and any(".visual." in n for n in g0)
    for name in g0:
        assert torch.allclose(g0[name], g1[name], atol=1e-5), (name, (g0[name] - g1[name]).abs().max())


def test_naive_one_dimensional_positions_are_caught(setup):
    model, encoder, rows, _ = setup
    plain = VisionPairCollator(encoder)(rows)
    packed = VisionPackedPairCollator(encoder)(rows)
    with torch.no_grad():
        c0, r0 = unpacked(model, plain)
        width = packed["input_ids"].shape[1]
        # Token index positions, rejected restarting where chosen started (the text-packing rule).
        naive = torch.zeros_like(packed["input_ids"])
        for b in range(naive.shape[0]):
            p, c = int(packed["prefix_len"][b]), int(packed["chosen_len"][b])
            naive[b, : p + c] = torch.arange(p + c)
            rest = width - p - c
            naive[b, p + c :] = torch.arange(p, p + rest)
        c1, r1 = packed_vision_pair_rewards(model, packed, positions=naive[None].expand(3, -1, -1))
    drift = max((c0 - c1).abs().max().item(), (r0 - r1).abs().max().item())
    assert drift > 1e-4, drift


def test_rows_with_zero_one_and_three_pictures_pack_with_their_own_grids(setup):
    """Each row's M-RoPE positions read that row's grids: the 3-picture row's are rows 1..3 of
    image_grid_thw, not row 2 (the mutant ``grids[b:b+n]`` reads the wrong ones, or too few). The replies'
    literal `<image>` (different in chosen and rejected) is text: the pair packs, no NotPackable."""
    model, encoder, _, mixed = setup
    plain = VisionPairCollator(encoder)(mixed)
    packed = VisionPackedPairCollator(encoder)(mixed)
    assert packed["images_per_row"].tolist() == [0, 1, 3]
    assert packed["image_grid_thw"].shape[0] == 4 and plain["image_grid_thw"].shape[0] == 8
    # the reply's `<image>` reached the model as text tokens, never as an image token
    image_pad = encoder.processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((plain["input_ids"] == image_pad).sum()) == int(plain["mm_token_type_ids"].sum())
    with torch.no_grad():
        c0, r0 = unpacked(model, plain)
        c1, r1 = packed_vision_pair_rewards(model, packed)
    assert torch.allclose(c0, c1, atol=1e-5), (c0, c1)
    assert torch.allclose(r0, r1, atol=1e-5), (r0, r1)


def test_a_batch_with_a_picture_in_a_reply_falls_back_to_unpacked(setup):
    """Issue 47 item 12, confirmed: a whole-conversation pair whose replies (that differ) each hold a picture
    passed the data stage and made the packed collator raise NotPackable mid-training. Now such a batch is
    collated unpacked (VisionPairCollator's tensors, which every trainer reads), and a batch without one packs."""
    model, encoder, rows, _ = setup
    tokenizer = encoder.processor.tokenizer
    ids = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    head = ids("<|im_start|>user\nDraw it.<|im_end|>\n<|im_start|>assistant\n")
    in_reply = {
        "chosen_input_ids": head + ids("Here: ") + [PICTURE_ID] + ids("<|im_end|>\n"),
        "rejected_input_ids": head + ids("No, this: ") + [PICTURE_ID] + ids("<|im_end|>\n"),
        "images": rows[1]["images"],
        "margin": 0.0,
    }
    batch = [rows[0], in_reply]
    fallen = VisionPackedPairCollator(encoder)(batch)
    plain = VisionPairCollator(encoder)(batch)
    assert "prefix_len" not in fallen and set(fallen) == set(plain)
    assert all(torch.equal(fallen[k], plain[k]) for k in plain)
    assert "prefix_len" in VisionPackedPairCollator(encoder)(rows)  # the other batches still pack
    with torch.no_grad():
        chosen, rejected = unpacked(model, fallen)
    assert torch.isfinite(chosen).all() and torch.isfinite(rejected).all()
