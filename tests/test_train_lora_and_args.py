"""LoRA through peft with the score head trained and saved; TrainingArguments from the spec."""

from __future__ import annotations

import torch

import helpers.models
from helpers.trainer import as_dataset, pair_rows, write_spec
from rmspec.inference.padding import pad_right
from rmspec.train.arguments import best_metric_name, build_training_arguments
from rmspec.train.factory import build_trainer
from rmspec.train.final_model import save_final_model
from rmspec.train.modeling import apply_lora, load_model, score_head
from rmspec.train.rewards import forward_scores

tiny_models = helpers.models.tiny_models  # the shared fixture


def test_lora_trains_adapters_and_the_head_and_saves_a_plain_model(tmp_path, tiny_models):
    spec = write_spec(
        tmp_path,
        tiny_models["llama"],
        approach="{kind: bradley_terry}",
        training="{max_steps: 20, learning_rate: 1.0e-2, global_batch_size: 8, logging_steps: 10, seed: 0}",
    ).spec
    loaded = load_model(str(tiny_models["llama"]), spec.approach, seed=0)
    tok = loaded.tokenizer
    head_before = score_head(loaded.model).weight.detach().clone()
    from rmspec.spec.model import LoraSpec

    model = apply_lora(loaded.model, LoraSpec(r=4, alpha=8), "bradley_terry")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert any("lora_A" in n for n in trainable) and any("score" in n for n in trainable)
    assert not any(n.endswith("embed_tokens.weight") for n in trainable)  # the backbone stays frozen

    args = build_training_arguments(spec, None, tmp_path / "ckpt", has_validation=True, use_cpu=True)
    val = as_dataset(pair_rows(tok, 24, 1))
    trainer = build_trainer(spec, model, tok, args, as_dataset(pair_rows(tok, 160, 0)), val)
    trainer.train()
    texts = [val[i]["chosen_input_ids"] for i in range(5)] + [val[i]["rejected_input_ids"] for i in range(5)]
    with torch.no_grad():
        before = forward_scores(trainer.model.eval(), *pad_right(texts, tok.pad_token_id))[:, 0]
    save_final_model(trainer, tok, tmp_path / "model", config_extra={}, card="# card\n")

    from transformers import AutoModelForSequenceClassification

    again = AutoModelForSequenceClassification.from_pretrained(tmp_path / "model").eval()
    assert not torch.equal(score_head(again).weight, head_before)  # the head was trained and saved
    with torch.no_grad():
        ids, mask = pad_right(texts, tok.pad_token_id)
        after = again(input_ids=ids, attention_mask=mask).logits[:, 0]
    torch.testing.assert_close(after, before, atol=1e-4, rtol=1e-4)


def test_early_stopping_selects_the_best_checkpoint_on_the_spec_metric(tmp_path, tiny_models):
    spec = write_spec(
        tmp_path,
        tiny_models["llama"],
        approach="{kind: bradley_terry}",
        training="{max_steps: 50, eval_steps: 5, early_stopping: {metric: eval/rm/loss, mode: min, patience: 2}}",
    ).spec
    args = build_training_arguments(spec, None, tmp_path / "ckpt", has_validation=True, use_cpu=True)
    assert args.load_best_model_at_end and args.metric_for_best_model == "loss"
    assert args.greater_is_better is False
    assert args.eval_steps == 5 and args.save_steps == 5  # a checkpoint at every evaluation
    assert best_metric_name("eval/rm/accuracy") == "accuracy"
    no_val = build_training_arguments(spec, None, tmp_path / "c2", has_validation=False, use_cpu=True)
    assert not no_val.load_best_model_at_end and no_val.eval_strategy == "no"


def test_a_tracker_that_is_not_installed_is_a_clear_error(tmp_path, tiny_models):
    import importlib.util

    import pytest

    from rmspec.errors import RmspecError
    from rmspec.train.arguments import tracker_env

    if importlib.util.find_spec("tensorboard") is not None:
        pytest.skip("tensorboard is installed here")
    path = tmp_path / "s.yaml"
    write_spec(tmp_path, tiny_models["llama"], approach="{kind: bradley_terry}", training="{max_steps: 1}")
    path.write_text((tmp_path / "spec.yaml").read_text() + "tracking: {backends: [tensorboard]}\n")
    from rmspec.spec import load_spec

    with pytest.raises(RmspecError) as err:
        tracker_env(load_spec(path).spec, tmp_path)
    assert "pip install tensorboard" in err.value.hint
