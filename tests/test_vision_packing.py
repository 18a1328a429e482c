"""Prompt-once packing with M-RoPE equals the unpacked two-sequence forward: rewards, the Bradley-Terry
loss and every gradient within 1e-5 on the same batch (images of different sizes, so different
visual token counts and grids); naive 1-D positions in the same packed rows are caught."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from rmspec.train.vision_packing import VisionPackedPairCollator, packed_vision_pair_rewards
from rmspec.vision.collate import VisionEncoder, VisionPairCollator
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
    rows = []
    for k, (w, h) in enumerate(sizes):
        path = folder / f"{k}.png"
        Image.effect_noise((w, h), 60).convert("RGB").save(path)
        prompt = f"<|im_start|>user\n<image>Describe picture {k}.<|im_end|>\n<|im_start|>assistant\n"
        ids = lambda text: processor.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
        rows.append(
            {
                "chosen_input_ids": ids(prompt + f"A noisy picture, {k} of them.<|im_end|>\n"),
                "rejected_input_ids": ids(prompt + "Nothing.<|im_end|>\n"),
                "images": [str(path)],
                "margin": 0.0,
            }
        )
    encoder = VisionEncoder(processor, image_text(config, processor))
    return model, encoder, rows


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
    model, encoder, rows = setup
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
    model, encoder, rows = setup
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
