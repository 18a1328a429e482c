"""Every approach.grpo field arrives in TRL's GRPOConfig under its name, the reward fields in the
reward rule, precision is the plan's (not GRPOConfig's bf16 default), and the judge rows hold both
orders of every pair with the template filled and the gold verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.ci import need

need("trl")
transformers = need("transformers")

REPO = Path(__file__).resolve().parents[1]

SETS = [
    "approach.grpo.num_generations=8",
    "approach.grpo.max_completion_length=17",
    "approach.grpo.temperature=0.7",
    "approach.grpo.top_p=0.9",
    "approach.grpo.beta=0.04",
    "approach.grpo.epsilon=0.3",
    "approach.grpo.loss_type=dr_grpo",
    "approach.grpo.scale_rewards=none",
    "approach.grpo.mask_truncated_completions=true",
    "approach.grpo.steps_per_generation=4",
    "training.micro_batch_size=2",
    "hardware.device=cpu",
]


def spec_with(*sets: str):
    from rmspec.spec import load_spec

    return load_spec(REPO / "specs" / "judge_grpo.yaml", list(sets)).spec


def test_every_grpo_field_reaches_grpo_config(tmp_path):
    from rmspec.train.judge_grpo import grpo_config

    spec = spec_with(*SETS)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=2, use_cpu=True, bf16=False, seed=11
    )
    config = grpo_config(args, spec)
    expected = dict(
        num_generations=8,
        max_completion_length=17,
        temperature=0.7,
        top_p=0.9,
        beta=0.04,
        epsilon=0.3,
        loss_type="dr_grpo",
        scale_rewards="none",
        mask_truncated_completions=True,
        steps_per_generation=4,
        use_vllm=False,
    )
    assert {k: getattr(config, k) for k in expected} == expected
    assert config.generation_batch_size == 2 * 1 * 4  # micro x processes x steps_per_generation
    assert config.bf16 is False and config.fp16 is False  # the plan's precision, not GRPOConfig's default
    assert config.seed == 11 and config.per_device_train_batch_size == 2  # the run's own arguments kept
    assert config.shuffle_dataset is False  # judge_rows already shuffled, keeping pair orders together


def test_reward_fields_reach_the_rule():
    from rmspec.train.judge_grpo import rule_from_spec

    spec = spec_with(
        "approach.reward={correct: 2, wrong: -0.5, unparsed: -2, format_pattern: '<t>', format_reward: 0.1}",
        "approach.ties=verdict",
        "approach.tie_verdict=T",
        r"approach.verdict_pattern=\[\[(A|B|T)\]\]",
    )
    rule = rule_from_spec(spec.approach)
    assert (rule.correct, rule.wrong, rule.unparsed) == (2, -0.5, -2)
    assert (rule.format_pattern, rule.format_reward, rule.tie_verdict) == ("<t>", 0.1, "T")
    assert rule.pattern == r"\[\[(A|B|T)\]\]"
    assert rule_from_spec(spec_with().approach).tie_verdict is None  # ties: reject


def test_judge_rows_hold_both_orders_with_the_template():
    from rmspec.inference.judge import judge_message
    from rmspec.train.judge_grpo import judge_rows

    pairs = [
        {
            "id": f"p{i}",
            "prompt_messages": [{"role": "user", "content": f"q{i}"}],
            "chosen": f"c{i}",
            "rejected": f"r{i}",
        }
        for i in range(5)
    ]
    approach = spec_with().approach
    rows = judge_rows(pairs, approach, seed=3)
    assert len(rows) == 10
    for first, swapped in zip(rows[::2], rows[1::2]):  # a pair's two orders are adjacent
        assert first["pair"] == swapped["pair"] and (first["order"], swapped["order"]) == ("first", "swapped")
        i = first["pair"][1:]
        assert first["prompt"] == judge_message(f"q{i}", f"c{i}", f"r{i}") and first["gold"] == "A"
        assert swapped["prompt"] == judge_message(f"q{i}", f"r{i}", f"c{i}") and swapped["gold"] == "B"
    assert [r["pair"] for r in rows[::2]] != [f"p{i}" for i in range(5)]  # seeded shuffle of the pairs
    assert rows == judge_rows(pairs, approach, seed=3)
    custom = spec_with("approach.judge_template=Q {prompt} | {response_a} | {response_b}").approach
    assert judge_rows(pairs[:1], custom, seed=0)[1]["prompt"] == "Q q0 | r0 | c0"
    with pytest.raises(ValueError, match="ties are rejected"):
        judge_rows([{**pairs[0], "tie": True}], approach, seed=0)


def test_ties_through_the_data_stage(tmp_path):
    """ties: reject drops labelled ties (reason tie); ties: verdict keeps them and both orders get the tie verdict."""
    import json

    from helpers.judge_grpo import build_judge_model
    from rmspec.data import prepare
    from rmspec.spec import load_spec
    from rmspec.train.judge_grpo import judge_rows

    model = build_judge_model(tmp_path / "m", hidden=32, layers=1)
    rows = [
        {"id": f"r{i}", "prompt": f"{i} + 1 =", "chosen": str(i + 1), "rejected": str(i + 2), "tie": i % 3 == 0}
        for i in range(12)
    ]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tok = transformers.AutoTokenizer.from_pretrained(model)
    tok.pad_token = tok.eos_token
    base = (REPO / "specs" / "judge_grpo.yaml").read_text()
    base = base.replace("../rmspec/data/demo/preferences.jsonl", str(tmp_path / "d.jsonl")).replace(
        "  split:\n    validation_fraction: 0.05\n", ""
    )
    for ties, kept in (("reject", 8), ("verdict", 12)):
        text = base + "\n# test\n"
        path = tmp_path / f"{ties}.yaml"
        path.write_text(text)
        sets = [f"approach.ties={ties}", r"approach.verdict_pattern=\[\[(A|B|C)\]\]", f"model.name_or_path={model}"]
        loaded = load_spec(path, sets)
        prepared = prepare(loaded, tok, cache_dir=tmp_path / f"cache-{ties}")
        held = list(prepared.validation) if prepared.validation is not None else []
        pairs = list(prepared.train) + held
        assert len(pairs) == kept and sum(p["tie"] for p in pairs) == kept - 8
        judged = judge_rows(pairs, loaded.spec.approach, seed=0)
        golds = {(r["pair"], r["order"]): r["gold"] for r in judged}
        for pair in pairs:
            tie = pair["tie"]
            assert golds[(pair["id"], "first")] == ("C" if tie else "A")
            assert golds[(pair["id"], "swapped")] == ("C" if tie else "B")
