"""A packed Bradley-Terry run follows the unpacked one: same loss at each of the first 20
optimizer steps and the same weights after them (within 1e-4, fp32); the path each setting takes."""

from __future__ import annotations

import pytest
import torch

import helpers.models
from helpers.trainer import pair_rows, train_logged
from rmspec.errors import RmspecError
from rmspec.train.collators import PairCollator
from rmspec.train.packing import OFF, SHARED_PREFIX, PackedPairCollator, packed_length, packing_path

tiny_models = helpers.models.tiny_models  # the shared fixture


def _run(tmp_path, model_dir, packing: str, steps: int = 20):
    def rows_with_a_long_prompt(tok):
        rows = pair_rows(tok, 80, 0)
        for r in rows:  # a long shared prompt, as in multi-turn data
            shared = tok(" ".join(f"w{10 + (int(r['id']) * 7 + k) % 60}" for k in range(12)))["input_ids"][:-1]
            r["chosen_input_ids"] = shared + r["chosen_input_ids"]
            r["rejected_input_ids"] = shared + r["rejected_input_ids"]
        return rows

    return train_logged(
        tmp_path,
        model_dir,
        approach="{kind: bradley_terry, center_rewards_coefficient: 0.01}",
        training=(
            f"{{max_steps: {steps}, learning_rate: 3.0e-3, global_batch_size: 8, logging_steps: 1, seed: 1, "
            f"group_by_length: false, "
            f"packing: {packing}}}"
        ),
        make_rows=rows_with_a_long_prompt,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_twenty_packed_steps_match_the_unpacked_run(tmp_path, tiny_models, kind):
    packed, packed_losses = _run(tmp_path / "packed", tiny_models[kind], "auto")
    plain, plain_losses = _run(tmp_path / "plain", tiny_models[kind], "off")
    assert packed.packing[0] == SHARED_PREFIX and isinstance(packed.data_collator, PackedPairCollator)
    assert plain.packing[0] == OFF and isinstance(plain.data_collator, PairCollator)
    assert len(packed_losses) == len(plain_losses) == 20
    assert plain_losses[-1] < plain_losses[0]  # it did learn: the comparison is not between two flat lines
    for step, (a, b) in enumerate(zip(packed_losses, plain_losses), start=1):
        assert a == pytest.approx(b, abs=1e-4), f"step {step}"
    for (name, p), (_, q) in zip(packed.model.named_parameters(), plain.model.named_parameters()):
        torch.testing.assert_close(p, q, atol=1e-4, rtol=0, msg=f"{name} after 20 steps")


def test_the_path_and_its_reason(tiny_models):
    from transformers import AutoConfig, BertConfig, LlamaConfig

    decoder = AutoConfig.from_pretrained(tiny_models["llama"])
    decoder._attn_implementation = "sdpa"
    assert packing_path("auto", "bradley_terry", decoder)[0] == SHARED_PREFIX
    assert packing_path("off", "bradley_terry", decoder) == (OFF, "training.packing: off")
    path, why = packing_path("auto", "pointwise", decoder)
    assert path == OFF and "one sequence per example" in why
    path, why = packing_path("auto", "bradley_terry", BertConfig())
    assert path == OFF and "both directions" in why
    flash = LlamaConfig()
    flash._attn_implementation = "flash_attention_2"
    assert packing_path("auto", "bradley_terry", flash)[0] == OFF
    with pytest.raises(RmspecError, match="cannot apply"):
        packing_path("shared_prefix", "bradley_terry", BertConfig())


def test_packed_length_is_prompt_once():
    assert packed_length([1, 2, 3, 4, 5], [1, 2, 3, 9]) == 3 + 2 + 1
    assert packed_length([7], [8, 9]) == 3
