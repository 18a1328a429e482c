"""hardware.context_parallel: auto (the default): the plan picks the smallest N whose share of a row fits.

Plan only, no torch: Llama-3.1-8B's shape from the built-in catalog (offline), on 8 GPUs of one node, prompt-once
rows of max_length x 2 tokens (no pair lengths can be sampled from a hub source here). Each choice is checked
against the plans of explicit numbers: auto's N must plan, and every smaller N must be refused.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmspec.errors import PlanError
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "specs"
HOST = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)
EIGHT = ["hardware.device=h100-80gb", "hardware.nodes=1", "training.global_batch_size=64"]
LONG = [*EIGHT, "training.max_length=65536", "training.gradient_checkpointing=on"]  # rows of 131,072 tokens


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def plan(*sets: str, spec: str = "ultrafeedback_bt.yaml") -> dict:
    return compile_plan(load_spec(SPECS / spec, list(sets)), host=HOST).to_json()


def refused(*sets: str, spec: str = "ultrafeedback_bt.yaml") -> PlanError:
    with pytest.raises(PlanError) as caught:
        plan(*sets, spec=spec)
    return caught.value


def test_auto_is_the_default_and_keeps_one_process_per_row_where_it_fits():
    assert load_spec(SPECS / "ultrafeedback_bt.yaml", []).spec.hardware.context_parallel == "auto"
    auto = plan(*EIGHT)
    assert "context_parallel" not in auto  # N = 1: no split, no section
    one = plan(*EIGHT, "hardware.context_parallel=1")
    assert auto["memory_per_device_gb"] == one["memory_per_device_gb"]
    assert auto["gradient_accumulation_steps"] == one["gradient_accumulation_steps"]


def test_auto_picks_the_smallest_n_that_fits_and_says_why():
    auto = plan(*LONG)
    cp = auto["context_parallel"]
    assert cp["degree"] == 2 and cp["row_tokens"] == 131072
    # N = 1 is refused on its own; N = 2 plans: auto's section is explicit 2's, with the reason beside it
    assert "nothing fits" in refused(*LONG, "hardware.context_parallel=1").message
    two = plan(*LONG, "hardware.context_parallel=2")
    assert {k: v for k, v in cp.items() if k != "chosen"} == two["context_parallel"]
    assert auto["memory_per_device_gb"] == two["memory_per_device_gb"]
    assert auto["gradient_accumulation_steps"] == two["gradient_accumulation_steps"]
    why = cp["chosen"]
    assert why.startswith("auto: a row of 131,072 tokens needs ")
    assert f"{cp['total_per_rank_gb']:.1f} GB per rank at N=2, of 72.0 GB usable" in why
    at_one = float(re.search(r"needs ([\d.]+) GB per process at N=1", why).group(1))
    assert at_one > 72.0


def test_auto_skips_an_n_that_does_not_fit():
    # 40 GB devices, rows of 122,880 tokens: a rank's half of the row is still too much, a quarter fits
    sets = [*LONG, "hardware.device=a100-40gb", "training.max_length=61440"]
    cp = plan(*sets)["context_parallel"]
    assert cp["degree"] == 4
    with pytest.raises(PlanError, match="nothing fits"):  # no strategy holds a rank's half
        plan(*sets, "hardware.context_parallel=2")
    at_two = float(re.search(r"([\d.]+) GB per rank at N=2;", cp["chosen"]).group(1))
    assert at_two > 36.0 >= cp["total_per_rank_gb"]
    assert cp == {**plan(*sets, "hardware.context_parallel=4")["context_parallel"], "chosen": cp["chosen"]}


def test_no_n_fits_refuses_with_the_figures_per_n_and_what_would():
    sets = [*EIGHT, "training.max_length=262144", "training.gradient_checkpointing=on"]
    error = refused(*sets)
    assert error.message.startswith("nothing fits: 8.03B parameters")  # the ordinary refusal, per strategy
    assert "no N fits a row of 524,288 tokens in 72.0 GB usable" in error.message
    figures = dict(re.findall(r"N=(\d+): ([\d.]+) GB per", error.message))
    assert sorted(figures, key=int) == ["1", "2", "4", "8"]
    assert all(float(gb) > 72.0 for gb in figures.values())
    assert float(figures["8"]) < float(figures["4"]) < float(figures["2"]) < float(figures["1"])
    assert "65,536 tokens each" in error.message  # N = 8's share
    # each alternative named was planned: the shorter length plans with the N it names
    shorter = re.search(r"training.max_length: (\d+) \(.*context_parallel (\d+):", error.hint or "")
    assert shorter is not None, error.hint
    length, degree = shorter.groups()
    fits = plan(*EIGHT, f"training.max_length={length}", "training.gradient_checkpointing=on")
    assert fits["context_parallel"]["degree"] == int(degree)
    assert "more devices:" in (error.hint or "") and "hardware.nodes" in (error.hint or "")


def test_checkpointing_off_is_named_when_it_would_fit():
    error = refused(*EIGHT, "training.max_length=65536", "training.gradient_checkpointing=off")
    assert "training.gradient_checkpointing: auto (context_parallel 2" in (error.hint or "")


@pytest.mark.parametrize(
    ("sets", "reason"),
    [
        (["model.attn_implementation=flash_attention_2"], "takes no custom mask"),
        (["training.packing=off"], "splits prompt-once rows"),
    ],
)
def test_where_a_row_cannot_split_the_memory_refusal_says_why(sets, reason):
    error = refused(*EIGHT, "training.max_length=131072", "training.gradient_checkpointing=on", *sets)
    assert error.message.startswith("nothing fits")  # the ordinary refusal, with its per-strategy lines
    assert "cannot split the rows: " in error.message and reason in error.message


def test_an_encoder_gets_the_reason():
    sets = ["hardware.device=a10g-24gb", "hardware.gpus_per_node=2", "training.max_length=1048576"]
    error = refused(*sets, spec="quickstart.yaml")
    assert error.message.startswith("nothing fits")
    assert "an encoder attends in both directions" in error.message


def test_one_process_gets_the_reason():
    one = ["hardware.device=l4-24gb", "hardware.gpus_per_node=1", "hardware.nodes=1", "training.global_batch_size=8"]
    error = refused(*one, "training.max_length=65536")
    assert "cannot split the rows: one process" in error.message


def test_an_explicit_number_is_kept():
    whole = plan(*LONG, "hardware.context_parallel=4")
    four = whole["context_parallel"]
    assert four["degree"] == 4 and "chosen" not in four  # 2 would fit; the spec's 4 stands
    # the micro batch is judged with a rank's gathered keys and values and mask slice: 2 fits a rank's share
    # of the row alone (73.7 GB with them, over the 72 usable), 1 fits with them
    assert whole["micro_batch_size"] == 1 and four["total_per_rank_gb"] <= 72.0
    assert whole["micro_batch_reason"] == "micro batch 2 would need 73.7 GB"
    error = refused(*LONG, "hardware.context_parallel=1")  # no split asked for: no word about splitting
    assert "cannot split" not in error.message and "context_parallel auto" not in error.message


def test_validate_takes_auto_and_refuses_other_words():
    exe = str(Path(sys.executable).parent / "rmspec")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    def validate(value: str) -> subprocess.CompletedProcess:
        argv = [exe, "validate", str(SPECS / "ultrafeedback_bt.yaml"), "--set", f"hardware.context_parallel={value}"]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)

    assert validate("auto").returncode == 0
    bad = validate("most")
    assert bad.returncode == 2 and "hardware.context_parallel" in bad.stdout + bad.stderr


def test_rmspec_plan_shows_why_and_exits_2_without_torch():
    """The worked spec of docs/long_context.md through the CLI: the reason line, exit 2 where nothing fits,
    and neither torch nor transformers imported on the way."""
    worked = str(SPECS / "llama8b_64k_context_parallel.yaml")
    code = (
        "import sys\n"
        "from rmspec.cli.main import cli\n"
        f"cli.main(['plan', {worked!r}], standalone_mode=False)\n"
        "try:\n"
        f"    cli.main(['plan', {worked!r}, '--set', 'training.max_length=262144'], standalone_mode=False)\n"
        "except SystemExit as e:\n"
        "    print('EXIT', e.code)\n"
        "except Exception as e:\n"
        "    print('EXIT', getattr(e, 'exit_code', None), type(e).__name__)\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'accelerate') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "250"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert "why 2: auto: a row of 131,072 tokens needs 98.5 GB per process at N=1" in out.stdout
    assert "71.7 GB per rank at N=2, of 72.0 GB usable" in out.stdout
    assert "EXIT 2" in out.stdout, out.stdout + out.stderr
