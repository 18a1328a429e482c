"""A plan cannot be impossible: no negative, NaN or infinite count, memory or time anywhere in it.

A property test drives model shapes (decoder and encoder, any head layout, vocabularies from 100 to 300k,
num_parameters from far too small to generous), hardware (every catalog device, detected hosts with and
without GPUs, 1-8 devices per node, 1-4 nodes, any strategy) and training sizes (batch, length, LoRA)
through the planner. Each example ends in a plan whose every number is finite and >= 0 (walked here,
independently of rmspec.plan.invariants), or in a refusal that is right for it: an impossible shape
(checked against the embedding count computed here), several nodes with device auto on a host without a
GPU, or nothing fitting. The invariant net itself ("impossible figures") must never be what stops a plan:
that would mean a formula went negative on a possible spec.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import REPO
from rmspec.errors import PlanError
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.plan.invariants import checked
from rmspec.spec import load_spec
from rmspec.spec.hardware import DEVICE_CATALOG

SPEC = REPO / "specs" / "quickstart.yaml"
GPUS = [key for key in DEVICE_CATALOG if key != "cpu"]
GPU_STRATEGIES = ["auto", "single", "ddp", "fsdp_shard_grad_op", "fsdp_full_shard", "fsdp_full_shard_offload"]
GPU_STRATEGIES += ["deepspeed_zero2", "deepspeed_zero3", "deepspeed_zero3_offload"]
SMI_NAMES = {"h100-80gb": ("NVIDIA H100 80GB HBM3", 79.6), "a100-40gb": ("NVIDIA A100-SXM4-40GB", 39.4)}


def impossible_numbers(document, path=""):
    """Every number in a JSON document that is negative, NaN or infinite, with its path."""
    if isinstance(document, dict):
        return [x for key, value in document.items() for x in impossible_numbers(value, f"{path}.{key}")]
    if isinstance(document, list):
        return [x for i, value in enumerate(document) for x in impossible_numbers(value, f"{path}[{i}]")]
    number = isinstance(document, (int, float)) and not isinstance(document, bool)
    return [(path, document)] if number and (math.isnan(document) or math.isinf(document) or document < 0) else []


@st.composite
def shapes(draw):
    architecture = draw(st.sampled_from(["decoder", "encoder"]))
    heads = draw(st.integers(1, 64))
    hidden = heads * draw(st.sampled_from([16, 32, 64, 128]))
    kv = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    shape = {
        "architecture": architecture,
        "hidden_size": hidden,
        "num_layers": draw(st.integers(1, 96)),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": draw(st.integers(1, 8 * hidden)),
        "vocab_size": draw(st.integers(100, 300_000)),
    }
    # The embeddings (and a decoder's untied LM head, as shape_from_spec builds it), counted here.
    fixed = shape["vocab_size"] * hidden * (2 if architecture == "decoder" else 1)
    fixed += 2 * hidden if architecture == "encoder" else 0  # BERT's embedding LayerNorm
    num = draw(
        st.one_of(
            st.integers(1, 10**12),  # anything, often impossible
            st.floats(0.5, 3.0).map(lambda f: max(1, int(fixed * f))),  # around the boundary
            st.integers(fixed + 1, fixed + 10**10),  # possible
        )
    )
    return {**shape, "num_parameters": num}, fixed


@st.composite
def hardware(draw):
    """(--set overrides, host facts): a catalog device, cpu, or auto on a host with or without GPUs."""
    device = draw(st.sampled_from(["cpu", "auto", *GPUS]))
    per_node = draw(st.integers(1, 8))
    nodes = draw(st.integers(1, 4))
    sets = [f"hardware.device={device}", f"hardware.gpus_per_node={per_node}", f"hardware.nodes={nodes}"]
    sets.append(f"hardware.headroom={draw(st.sampled_from([0, 0.1, 0.3, 0.5]))}")
    host_gpus = ()
    if device == "auto" and draw(st.booleans()):
        host_gpus = (SMI_NAMES[draw(st.sampled_from(sorted(SMI_NAMES)))],) * per_node
    gpu = device in GPUS or bool(host_gpus)
    strategy = draw(st.sampled_from(GPU_STRATEGIES if gpu else ["auto", "single", "ddp"]))
    sets.append(f"hardware.strategy={strategy}")
    host = HostFacts((), draw(st.sampled_from([4.0, 16.0, 64.0, 512.0, 2048.0])), host_gpus, draw(st.integers(1, 64)))
    return sets, host, device == "auto" and not host_gpus and nodes > 1, per_node * nodes


@st.composite
def training(draw):
    sets = [f"training.max_length={draw(st.sampled_from([16, 128, 512, 2048, 8192]))}"]
    sets.append(f"training.global_batch_size={{processes}} x {2 ** draw(st.integers(0, 6))}")  # filled in below
    if draw(st.booleans()):
        sets.append(f"model.lora={{r: {draw(st.integers(1, 64))}}}")
    return sets


def _batch(override: str, processes: int) -> str:
    if not override.startswith("training.global_batch_size="):
        return override
    factor = int(override.rsplit(" x ", 1)[1])
    return f"training.global_batch_size={processes * factor}"


def test_no_plan_holds_a_negative_or_nan_figure_in_500_examples():
    seen: Counter[str] = Counter()

    @settings(
        max_examples=500,
        deadline=None,
        derandomize=True,  # the same 500 examples on every run and machine
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(shapes(), hardware(), training())
    def check(shape_and_fixed, hardware_and_host, training_sets):
        shape, fixed = shape_and_fixed
        hardware_sets, host, auto_on_cpu_nodes, processes = hardware_and_host
        training_sets = [_batch(s, processes) for s in training_sets]  # divisible by the processes
        sets = [f"model.shape={json.dumps(shape)}", *hardware_sets, *training_sets]
        try:
            loaded = load_spec(SPEC, sets)
        except Exception as exc:  # a spec rule refused the combination: fine, counted
            seen[f"spec refused: {type(exc).__name__}"] += 1
            return
        try:
            plan = compile_plan(loaded, host=host)
        except PlanError as exc:
            said = exc.message
            assert "impossible figures" not in said, f"{sets}\n{said}"  # a formula went negative
            if "model.shape is impossible" in said:
                assert fixed >= shape["num_parameters"], (sets, said)
                seen["impossible shape"] += 1
            elif "this host has no GPU" in said:
                assert auto_on_cpu_nodes, (sets, said)
                seen["auto on nodes without GPU"] += 1
            else:
                assert fixed < shape["num_parameters"] and not auto_on_cpu_nodes, (sets, said)
                seen["refused: " + said.split(":", 1)[0][:40]] += 1
            return
        assert fixed < shape["num_parameters"] and not auto_on_cpu_nodes, sets  # planned only when possible
        assert impossible_numbers(plan.to_json()) == [], sets
        seen["planned"] += 1

    check()
    print(dict(seen))
    # The examples reach every outcome, and most of them are plans.
    assert seen["planned"] >= 150 and seen["impossible shape"] >= 20 and seen["auto on nodes without GPU"] >= 5, seen
    assert sum(seen.values()) == 500


def test_the_issue_shape_exits_2_naming_the_shape_fields():
    """vocab 150000 x hidden 384 with num_parameters 22000000 gave trainable_parameters -35,599,616."""
    shape = (
        "model.shape={architecture: decoder, num_parameters: 22000000, hidden_size: 384, num_layers: 6, "
        "num_attention_heads: 12, intermediate_size: 1536, vocab_size: 150000}"
    )
    with pytest.raises(PlanError) as caught:
        compile_plan(load_spec(SPEC, [shape]), host=HostFacts((), 16.0, (), 2))
    assert caught.value.exit_code == 2
    for field in ("model.shape.vocab_size", "model.shape.hidden_size", "model.shape.num_parameters"):
        assert field in caught.value.message
    assert f"{150000 * 384:,}" in caught.value.message  # the embedding count, computed here


def test_the_net_refuses_a_plan_with_a_negative_or_nan_figure():
    plan = compile_plan(load_spec(SPEC, []), host=HostFacts((), 16.0, (), 2))
    assert checked(plan) is plan
    document = plan.to_json()
    for where, bad in ((("model", "trainable_parameters"), -1), (("estimate", None), float("nan"))):
        broken = json.loads(json.dumps(document))
        section, key = where
        if key is None:  # the first number of the estimate section
            key = next(k for k, v in broken[section].items() if isinstance(v, (int, float)))
        broken[section][key] = bad
        with pytest.raises(PlanError) as caught:
            checked(type(plan).from_json(broken))
        assert f"{section}.{key}" in caught.value.message
