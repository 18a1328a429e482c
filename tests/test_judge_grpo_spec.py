"""The GRPO judge's spec checks: TRL's launch constraints refused at validate, each naming the field
and what to write; GRPO-only options refused under method: sft; the shipped two-stage specs."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "specs" / "judge_grpo.yaml"


def refused(cli, *sets: str) -> str:
    args = ["validate", str(SPEC)]
    for s in sets:
        args += ["--set", s]
    result = cli(*args)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    return result.err


def test_shipped_stages_validate(cli):
    for name in ("judge_grpo.yaml", "judge_grpo_sft.yaml"):
        result = cli("validate", str(REPO / "specs" / name))
        assert result.code == 0, result.err


def test_use_vllm_refused_on_a_cpu_plan(cli):
    err = refused(cli, "hardware.device=cpu", "approach.grpo.use_vllm=true")
    assert "approach.grpo.use_vllm" in err and "use_vllm: false" in err
    assert cli("validate", str(SPEC), "--set", "approach.grpo.use_vllm=true").code == 0  # an L4 plan may


def test_generation_batch_not_divisible_by_num_generations(cli):
    err = refused(cli, "approach.grpo.num_generations=3")  # global batch 16
    assert "training.global_batch_size" in err and "num_generations 3" in err
    assert "global_batch_size: 18" in err  # the next multiple
    err = refused(cli, "approach.grpo.steps_per_generation=3", "training.micro_batch_size=3")
    assert "approach.grpo.steps_per_generation" in err and "9 completions" in err
    err = refused(cli, "approach.grpo.steps_per_generation=2")  # micro batch auto: unknown product
    assert "micro_batch_size is auto" in err


def test_num_generations_below_two(cli):
    err = refused(cli, "approach.grpo.num_generations=1")
    assert "approach.grpo.num_generations" in err and "2 or more" in err


def test_scores_need_two_groups_and_ties_a_readable_verdict(cli):
    err = refused(cli, "approach.output=scores")  # the spec's [[(A|B)]] has one group
    assert "approach.verdict_pattern" in err and "two groups" in err
    err = refused(cli, "approach.ties=verdict")  # [[(A|B)]] cannot read C
    assert "approach.tie_verdict" in err
    ok = cli(
        "validate", str(SPEC), "--set", "approach.ties=verdict", "--set", r"approach.verdict_pattern=\[\[(A|B|C)\]\]"
    )
    assert ok.code == 0, ok.err
    err = refused(cli, "approach.judge_template=Judge {prompt} {response_a}")
    assert "{response_b}" in err


@pytest.mark.parametrize("field", ["grpo={num_generations: 2}", "ties=verdict", "judge_template=x"])
def test_grpo_options_refused_under_sft(cli, field):
    err = refused(cli, "approach.method=sft", "data.mapping.preset=messages", f"approach.{field}")
    assert "method: grpo" in err


def test_scores_default_pattern_and_template(tmp_path):
    from rmspec.approaches.generative import DEFAULT_SCORES_PATTERN, DEFAULT_SCORES_TEMPLATE
    from rmspec.spec import load_spec

    text = SPEC.read_text().replace("  verdict_pattern: '\\[\\[(A|B)\\]\\]'\n", "  output: scores\n")
    assert "output: scores" in text
    path = tmp_path / "s.yaml"
    path.write_text(text.replace("../rmspec", str(REPO / "rmspec")))
    approach = load_spec(path).spec.approach
    assert approach.row_kind == "bradley_terry"  # GRPO trains on pairs
    assert approach.prompt_template == DEFAULT_SCORES_TEMPLATE
    assert approach.judge_pattern == DEFAULT_SCORES_PATTERN


def test_export_refusals_for_judges(cli, tmp_path):
    err = cli("export", str(SPEC), "--to", "verl", "-o", str(tmp_path / "x.py")).err
    assert "writes a directory" in err
    assert "exports to verl" in cli("export", str(SPEC), "--to", "openrlhf", "-o", str(tmp_path / "d")).err
    sft = cli("export", str(REPO / "specs" / "judge_grpo_sft.yaml"), "--to", "verl", "-o", str(tmp_path / "d"))
    assert sft.code == 2 and "method: grpo" in sft.err and not (tmp_path / "d").exists()


def test_plan_sizes_the_reference_model_and_the_kv_cache():
    """The plan's GRPO lines, by hand for the shipped spec (Qwen2.5-0.5B from the catalogue, bf16 on an L4)."""
    import re

    from rmspec.plan import compile_plan
    from rmspec.plan.hardware import HostFacts
    from rmspec.spec import load_spec

    host = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)
    plan = compile_plan(load_spec(SPEC), host=host).to_json()
    shape = plan["model"]["shape"]
    memory = next(w for w in plan["warnings"] if w.startswith("grpo memory"))
    kv_width = shape["num_key_value_heads"] * shape["head_dim"]
    completions = plan["micro_batch_size"] * plan["gradient_accumulation_steps"]  # steps_per_generation unset
    kv = 2 * shape["num_layers"] * kv_width * 2 * completions * (1024 + 32) / 2**30
    reference = shape["num_parameters"] * 2 / 2**30
    assert f"reference model {reference:.2f} GB" in memory and f"generation KV cache {kv:.2f} GB" in memory
    assert f"{completions} completions x 1056 tokens" in memory
    timing = next(w for w in plan["warnings"] if w.startswith("grpo time"))
    assert "512 tokens generated" in timing and "16,384 prompt tokens" in timing  # 16 x 32, 16 x 1024
    no_kl = compile_plan(load_spec(SPEC, ["approach.grpo.beta=0"]), host=host).to_json()
    assert "reference model 0.00 GB (beta 0: none loaded)" in next(w for w in no_kl["warnings"] if "grpo memory" in w)
    assert re.search(r"with the training peak: [\d.]+ of", memory)


def test_periodic_validation_options_refused(cli):
    err = refused(cli, "training.eval_steps=5", "training.final_model=best")
    assert "training.eval_steps" in err and "training.final_model" in err and "validated once, at the end" in err


def test_a_grpo_spec_needs_the_grpo_extra():
    from rmspec.extras import spec_needs
    from rmspec.spec import load_spec

    needs = spec_needs(load_spec(SPEC).spec)
    assert [(n.extra, n.modules) for n in needs if n.extra == "grpo"] == [("grpo", ("trl",))]
    assert not [n for n in spec_needs(load_spec(REPO / "specs" / "judge_grpo_sft.yaml").spec) if n.extra == "grpo"]


def test_grpo_reads_pairs_not_conversations(cli):
    err = refused(cli, "data.mapping.preset=messages")
    assert "trains on preference pairs" in err and "pairs, hh-rlhf" in err


def test_plan_refuses_use_vllm_when_device_auto_lands_on_cpus(cli):
    from rmspec.errors import PlanError
    from rmspec.plan import compile_plan
    from rmspec.plan.hardware import HostFacts
    from rmspec.spec import load_spec

    host = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)  # no GPU
    spec = load_spec(SPEC, ["hardware.device=auto", "approach.grpo.use_vllm=true"])
    with pytest.raises(PlanError, match="approach.grpo.use_vllm"):
        compile_plan(spec, host=host)
    compile_plan(load_spec(SPEC, ["hardware.device=auto"]), host=host)  # without vLLM it plans
