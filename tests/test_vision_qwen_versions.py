"""Qwen2.5-VL and Qwen3-VL as reward models: rmspec's reward class (transformers ships no
sequence-classification class for them: rmspec.vision.models builds one on transformers' generic head)
loads every language and vision weight of a tiny ``*ForConditionalGeneration`` checkpoint, and its reward
with an image equals transformers' own base model's last hidden state times the score weight.
tests/test_vision_model.py does the same for Qwen2-VL, tests/test_vision_families.py for the other families."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from rmspec.vision.models import reward_class
from rmspec.vision.tiny import SPECIAL_TOKENS, build_tokenizer

torch.set_num_threads(1)
HIDDEN = 64


def _ids(tokenizer):
    return {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}


def _text(tokenizer, hidden=HIDDEN) -> dict:
    ids = _ids(tokenizer)
    half = hidden // 4 // 2
    time_dims = half // 4
    section = [time_dims, (half - time_dims) // 2, half - time_dims - (half - time_dims) // 2]
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": hidden // 4,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section},
        "pad_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
    }


def qwen2_5_vl(tokenizer):
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    vision = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_heads": 2,
        "out_hidden_size": HIDDEN,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 56,
        "fullatt_block_indexes": [1],
    }
    return Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, vision, 14


def qwen3_vl(tokenizer):
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    vision = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_heads": 2,
        "out_hidden_size": HIDDEN,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "num_position_embeddings": 64,
        "deepstack_visual_indexes": [0],
    }
    return Qwen3VLConfig, Qwen3VLForConditionalGeneration, vision, 16


@pytest.fixture(scope="module", params=[qwen2_5_vl, qwen3_vl], ids=["qwen2_5_vl", "qwen3_vl"])
def base(request, tmp_path_factory):
    tokenizer = build_tokenizer()
    config_class, generation_class, vision, patch = request.param(tokenizer)
    ids = _ids(tokenizer)
    config = config_class(
        text_config=_text(tokenizer),
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(config.model_type)
    generation_class(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, generation_class, patch


def _inputs(folder, patch):
    """One conversation with a 64x96 picture: pixel values from the family's image processor rule, the
    image pad token repeated as many times as the picture's merged patches."""
    from transformers import AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tokenizer = AutoTokenizer.from_pretrained(folder)
    images = Qwen2VLImageProcessorPil(patch_size=patch, min_pixels=4 * patch * patch, max_pixels=64 * patch * patch)
    picture = Image.new("RGB", (96, 64), (30, 140, 200))
    pixels = images(images=[picture], return_tensors="pt")
    pads = int(pixels["image_grid_thw"].prod()) // 4
    text = (
        "<|im_start|>user\n<|vision_start|>" + "<|image_pad|>" * pads + "<|vision_end|>What colour?<|im_end|>\n"
        "<|im_start|>assistant\nBlue.<|im_end|>\n"
    )
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")
    inputs = {"input_ids": ids["input_ids"], "attention_mask": ids["attention_mask"], **pixels}
    if patch == 16:  # Qwen3-VL reads which tokens are the image's (its processor returns them)
        inputs["mm_token_type_ids"] = (ids["input_ids"] == tokenizer.convert_tokens_to_ids("<|image_pad|>")).long()
    return inputs


def test_every_weight_loads_and_the_reward_is_the_last_hidden_state_times_the_score(base):
    from transformers import AutoConfig

    folder, generation_class, patch = base
    source = generation_class.from_pretrained(folder).eval()
    expected = {k: v for k, v in source.state_dict().items() if k.startswith("model.")}
    assert any(".visual." in k for k in expected) and any(".language_model." in k for k in expected)
    config = AutoConfig.from_pretrained(folder, num_labels=1)
    model = reward_class(config).from_pretrained(folder, num_labels=1).eval()
    got = model.state_dict()
    assert [k for k, v in expected.items() if k not in got or not torch.equal(got[k], v)] == []
    assert set(got) == {*expected, "score.weight"}
    with torch.no_grad():
        model.score.weight.normal_()  # a trained head, not zeros
        inputs = _inputs(folder, patch)
        reward = model(**inputs).logits[0, 0]
        hidden = source.model(**inputs).last_hidden_state[0, -1]
        by_hand = hidden @ model.score.weight[0]
        other = {**inputs, "pixel_values": torch.zeros_like(inputs["pixel_values"])}
        blank = model(**other).logits[0, 0]
    assert float(reward) == pytest.approx(float(by_hand), abs=1e-5)
    assert abs(float(reward) - float(blank)) > 1e-4  # the picture is read


def test_for_qwen2_5_vl_the_comparison_catches_an_unregistered_class(base):
    """The trap rmspec's registration avoids (REFERENCE 16): the same class without the conversion mapping
    loads Qwen2.5-VL's language model at random; the comparison above would fail on it. Qwen3-VL's
    checkpoints are already nested as the class reads them, so the mapping changes nothing there."""
    from transformers import AutoConfig
    from transformers.modeling_layers import GenericForSequenceClassification

    folder, generation_class, _ = base
    pretrained = next(b for b in generation_class.__mro__ if b.__name__.endswith("PreTrainedModel"))

    class Unregistered(GenericForSequenceClassification, pretrained):
        pass

    model = Unregistered.from_pretrained(folder, config=AutoConfig.from_pretrained(folder, num_labels=1))
    source = generation_class.from_pretrained(folder).state_dict()
    got = model.state_dict()
    bad = [k for k, v in source.items() if k.startswith("model.") and (k not in got or not torch.equal(got[k], v))]
    if generation_class.__name__.startswith("Qwen2_5"):
        assert any(".language_model." in k for k in bad)
    else:
        assert bad == []
