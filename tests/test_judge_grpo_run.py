"""A tiny judge trained by GRPO on CPU through `rmspec run`: the synthetic task is text-decided (the
correct sum wins), the model a ~1M-parameter Llama built from a config. The run completes, its
metrics move, results.json holds held-out verdict accuracy in both orders, the saved model loads in
plain transformers as a causal LM and `rmspec serve` answers on the OpenAI route as plain
transformers generates."""

from __future__ import annotations

import json

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")
need("trl")

from helpers.judge_grpo import build_judge_model, write_spec  # noqa: E402
from helpers.runs import metrics_rows, rmspec  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpo")
    model = build_judge_model(tmp / "model-src")
    spec = write_spec(tmp, model, steps=12)
    result = rmspec("run", str(spec), cwd=tmp, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return tmp / "runs" / "grpo"


def test_run_completes_and_metrics_move(grpo_run):
    rows = [r for r in metrics_rows(grpo_run) if "train/sft/reward" in r]
    assert len(rows) == 12  # logging_steps 1, max_steps 12
    for key in (
        "train/sft/reward_std",
        "train/sft/frac_reward_zero_std",
        "train/sft/judge/verdict_accuracy",
        "train/sft/judge/unparsed_rate",
        "train/sft/completions/mean_length",
        "train/sft/completions/clipped_ratio",
    ):
        assert all(key in r for r in rows), key
    first, last = rows[:3], rows[-3:]
    mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)  # noqa: E731
    # from a random init the judge first writes no verdict; GRPO teaches it to write one
    assert mean(first, "train/sft/judge/unparsed_rate") > 0.5
    assert mean(last, "train/sft/judge/unparsed_rate") < mean(first, "train/sft/judge/unparsed_rate") - 0.3
    assert mean(last, "train/sft/reward") > mean(first, "train/sft/reward") + 0.3
    # the reward is the verdict reward: reward = 2 * accuracy - 1 when correct 1, wrong and unparsed -1
    for r in rows:
        assert r["train/sft/reward"] == pytest.approx(2 * r["train/sft/judge/verdict_accuracy"] - 1, abs=1e-6)
    # both orders of a pair share a generation batch: position agreement is measured while training, a
    # share of pairs (its value against a recomputation: the held-out test below; split votes: unit tests)
    agreement = [r["train/sft/judge/position_agreement"] for r in rows if "train/sft/judge/position_agreement" in r]
    assert agreement and all(0.0 <= a <= 1.0 for a in agreement)
    assert json.loads((grpo_run / "status.json").read_text())["state"] == "completed"


def test_held_out_verdict_accuracy_in_both_orders(grpo_run):
    results = json.loads((grpo_run / "results.json").read_text())
    metrics = results["validation"]["metrics"]
    first, swapped = metrics["verdict_accuracy_first_order"], metrics["verdict_accuracy_swapped_order"]
    # recomputed from the judged rows rmspec wrote: each held-out pair, both orders
    judged = [json.loads(x) for x in (grpo_run / "eval" / "validation.jsonl").read_text().splitlines()]
    held_out = json.loads((grpo_run / "data_report.json").read_text())["splits"]["validation"]
    assert len(judged) == held_out > 0
    assert first == pytest.approx(sum(r["verdict"] == "A" for r in judged) / len(judged))
    assert swapped == pytest.approx(sum(r["verdict_swapped"] == "B" for r in judged) / len(judged))
    final = [r for r in metrics_rows(grpo_run) if "eval/sft/verdict_accuracy_first_order" in r][-1]
    # the trainer's own end-of-run judging (greedy, same prompts) agrees with the evaluation's
    assert final["eval/sft/verdict_accuracy_first_order"] == pytest.approx(first)
    assert final["eval/sft/verdict_accuracy_swapped_order"] == pytest.approx(swapped)
    # position agreement's value, recomputed from the judged rows: of the pairs with a verdict in both
    # orders, the share that picks the same response (A first and B swapped, or B first and A swapped);
    # one greedy verdict per order, so no split vote
    both = [r for r in judged if r["verdict"] in ("A", "B") and r["verdict_swapped"] in ("A", "B")]
    assert both, "the trained judge wrote no verdict in both orders"
    agree = sum((r["verdict"] == "A") == (r["verdict_swapped"] == "B") for r in both) / len(both)
    assert final["eval/sft/position_agreement"] == pytest.approx(agree)


def test_saved_model_is_a_plain_causal_lm_and_serves_on_the_openai_route(grpo_run):
    from helpers.serve_process import ServeProcess
    from helpers.serving import need as need_client
    from rmspec.inference.judge import judge_message

    model_dir = grpo_run / "model"
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    assert isinstance(model, transformers.LlamaForCausalLM)
    messages = [{"role": "user", "content": judge_message("3 + 4 =", "7", "9")}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False)
    expected = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    openai = need_client("openai")
    proc = ServeProcess(grpo_run, "--served-model-name", "judge")
    try:
        client = openai.OpenAI(base_url=proc.url + "/v1", api_key="unused")
        reply = client.chat.completions.create(model="judge", messages=messages, max_tokens=4, temperature=0)
        assert reply.choices[0].message.content == expected
        assert "[[A]]" in expected or "[[B]]" in expected  # the trained judge writes a verdict
    finally:
        proc.stop()


def test_export_to_verl_reads_with_verls_dataset_and_scores_with_its_reward_manager(grpo_run, tmp_path):
    """`rmspec export RUN --to verl -o DIR`: verl 0.9.1's RLHFDataset reads the Parquet, its
    NaiveRewardManager calls the exported compute_score (loaded by verl's get_custom_reward_fn), and
    each reward equals rmspec's verdict reward of the same decoded completion."""
    need("verl")
    import numpy as np
    from omegaconf import OmegaConf
    from verl.protocol import DataProto
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.workers.reward_manager.naive import NaiveRewardManager

    from rmspec.spec import load_spec
    from rmspec.train.judge_grpo import rule_from_spec
    from rmspec.train.judge_reward import verdict_reward

    out = tmp_path / "verl"
    result = rmspec("export", str(grpo_run), "--to", "verl", "-o", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    command = (out / "train_verl.sh").read_text()
    for setting in ("algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=4", "data.max_response_length=4"):
        assert setting in command
    assert f"actor_rollout_ref.model.path={(grpo_run / 'model').resolve()}" in command
    tok = transformers.AutoTokenizer.from_pretrained(grpo_run / "model")
    tok.pad_token = tok.eos_token
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 256, "cache_dir": str(tmp_path / "c")})
    dataset = RLHFDataset(str(out / "train.parquet"), tok, config)
    report = json.loads((grpo_run / "data_report.json").read_text())
    assert len(dataset) == 2 * report["splits"]["train"]  # both orders of every training pair
    items = [dataset[i] for i in range(6)]
    assert [it["reward_model"]["ground_truth"] for it in items] == ["A", "B"] * 3  # a pair's orders adjacent
    completions = ["[[A]]", "[[B]]", "5 [[A]] [[B]]", "7", "[[A]] [[A]]", "[[A]]"]
    prompts = [
        tok.apply_chat_template(it["raw_prompt"], add_generation_prompt=True, tokenize=True, return_dict=False)
        for it in items
    ]
    responses = [tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for c in completions]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses)) + 2
    pad = tok.pad_token_id
    mask = [
        [0] * (p_len - len(p)) + [1] * (len(p) + len(r)) + [0] * (r_len - len(r)) for p, r in zip(prompts, responses)
    ]
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts]),
            "responses": torch.tensor([r + [pad] * (r_len - len(r)) for r in responses]),
            "attention_mask": torch.tensor(mask),
        },
        non_tensors={
            "data_source": np.array([it["data_source"] for it in items], dtype=object),
            "reward_model": np.array([it["reward_model"] for it in items], dtype=object),
            "extra_info": np.array([it["extra_info"] for it in items], dtype=object),
        },
    )
    reward_fn = get_custom_reward_fn(
        OmegaConf.create(
            {"reward": {"custom_reward_function": {"path": str(out / "compute_score.py"), "name": "compute_score"}}}
        )
    )
    answer = NaiveRewardManager(tok, num_examine=0, compute_score=reward_fn)(data, return_dict=True)
    got = [answer["reward_tensor"][i, len(r) - 1].item() for i, r in enumerate(responses)]
    rule = rule_from_spec(load_spec(grpo_run / "spec.yaml").spec.approach)
    decoded = [tok.decode(r, skip_special_tokens=True) for r in responses]
    expected = [verdict_reward(d, it["reward_model"]["ground_truth"], rule) for d, it in zip(decoded, items)]
    assert got == pytest.approx(expected, abs=1e-9)
    assert got == [
        1.0,
        1.0,
        -1.0,
        -1.0,
        1.0,
        -1.0,
    ]  # by hand (gold A, B, A, B, A, B): right, right, both verdicts, none, right (repeated), wrong
