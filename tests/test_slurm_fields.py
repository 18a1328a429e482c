"""hardware.slurm: what a real cluster asks of a job (partition, account, time, QoS, constraint, a GPU
request, further options) becomes #SBATCH lines that sbatch reads, each validated; and a plan on several
nodes never guesses its device from a planning host without GPUs. The cluster itself takes the lines in
tests/test_slurm_train.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from rmspec.errors import PlanError, SpecError
from rmspec.plan import compile_plan
from rmspec.plan.hardware import HostFacts
from rmspec.spec import load_spec

SPECS = REPO / "specs"
NO_GPU = HostFacts((), 16.0, (), 2)
CPU_2_NODES = ["hardware.nodes=2"]  # the quickstart says device: cpu


def _plan(spec: str, *sets: str, host: HostFacts = NO_GPU) -> dict:
    return compile_plan(load_spec(SPECS / spec, list(sets)), host=host).to_json()


def sbatch_options(script: str) -> list[str]:
    """The options sbatch takes from a script, read as sbatch reads them (man sbatch): `#SBATCH` lines
    before the first line that is neither a comment nor blank; the rest of the script is not read."""
    options = []
    for line in script.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#SBATCH "):
            options.append(line[len("#SBATCH ") :])
    return options


def test_every_field_becomes_its_sbatch_line_before_the_first_command():
    slurm = (
        "hardware.slurm={partition: gpu-long, account: proj42, time: '1-12:00:00', qos: high, "
        "constraint: 'a100&ib', extra: [--mem=0, --mail-type=END]}"
    )
    script = _plan("ultrafeedback_bt.yaml", slurm)["slurm_script"]
    options = sbatch_options(script)
    for line in (
        "--partition=gpu-long",
        "--account=proj42",
        "--time=1-12:00:00",
        "--qos=high",
        "--constraint=a100&ib",
        "--mem=0",
        "--mail-type=END",
        "--gpus-per-node=8",
        "--nodes=2",
    ):
        assert options.count(line) == 1, (line, options)
    # One option per name: nothing the spec added repeats what rmspec writes.
    names = [o.split("=", 1)[0] for o in options]
    assert len(names) == len(set(names)), names


def test_without_hardware_slurm_the_script_leaves_the_cluster_options_to_sbatch():
    options = sbatch_options(_plan("ultrafeedback_bt.yaml")["slurm_script"])
    names = {o.split("=", 1)[0] for o in options}
    # SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ... fill these at submit time (docs/several_nodes.md)
    assert not names & {"--partition", "--account", "--time", "--qos", "--constraint"}


def test_a_typed_gpu_request_replaces_the_count():
    options = sbatch_options(_plan("ultrafeedback_bt.yaml", "hardware.slurm={gpus_per_node: 'a100:8'}")["slurm_script"])
    assert [o for o in options if o.startswith("--gpus-per-node")] == ["--gpus-per-node=a100:8"]


def test_a_cpu_plan_on_several_nodes_asks_for_no_gpu():
    options = sbatch_options(
        _plan("quickstart.yaml", *CPU_2_NODES, "hardware.slurm={partition: debug}")["slurm_script"]
    )
    assert "--partition=debug" in options and not any(o.startswith("--gpus") for o in options)


@pytest.mark.parametrize("value", ["30", "0", "45:30", "02:00:00", "1-12", "1-12:30", "1-12:30:15", "7-0:0:0"])
def test_each_time_format_sbatch_reads_is_accepted_and_written(value):
    script = _plan("quickstart.yaml", *CPU_2_NODES, f"hardware.slurm={{time: '{value}'}}")["slurm_script"]
    assert f"--time={value}" in sbatch_options(script)


def test_minutes_as_a_yaml_number_are_accepted():
    script = _plan("quickstart.yaml", *CPU_2_NODES, "hardware.slurm={time: 90}")["slurm_script"]
    assert "--time=90" in sbatch_options(script)


def _refused(*sets: str) -> str:
    """The spec errors of the quickstart on two CPU nodes with `sets` (values in YAML double quotes, as
    json.dumps writes them, so that \\n in a test is a real line break in the value)."""
    with pytest.raises(SpecError) as caught:
        load_spec(SPECS / "quickstart.yaml", [*CPU_2_NODES, *sets])
    return str(caught.value) + " ".join(i.message + i.path for i in caught.value.issues)


@pytest.mark.parametrize(
    "value", ["1:2:3:4", "2h", "00:61:00", "1-", "-5", "12:00:00 ", "1.5", "00:10:00\n#SBATCH --qos=x"]
)
def test_a_time_sbatch_cannot_read_is_refused_with_the_formats(value):
    said = _refused(f"hardware.slurm={{time: {json.dumps(value)}}}")
    assert "hardware.slurm.time" in said and "HH:MM:SS" in said


@pytest.mark.parametrize("field", ["partition", "account", "qos", "constraint"])
@pytest.mark.parametrize("value", ["gpu\nhostname", "gpu\r", "gpu long", "a\tb", ""])
def test_a_line_break_or_a_space_cannot_be_smuggled_into_a_word(field, value):
    said = _refused(f"hardware.slurm={{{field}: {json.dumps(value)}}}")
    assert f"hardware.slurm.{field}" in said and "one word" in said


@pytest.mark.parametrize("line", ["--mem=0\nrm -rf ~", "mem=0", " --mem=0", "--mem=0 "])
def test_an_extra_entry_is_one_option_on_one_line(line):
    assert "hardware.slurm.extra" in _refused(f"hardware.slurm={{extra: [{json.dumps(line)}]}}")


@pytest.mark.parametrize(
    ("line", "field"),
    [("--nodes=3", "hardware.nodes"), ("-p gpu", "hardware.slurm.partition"), ("--time=5", "hardware.slurm.time")],
)
def test_an_extra_entry_cannot_repeat_an_option_rmspec_writes(line, field):
    said = _refused(f"hardware.slurm={{extra: [{json.dumps(line)}]}}")
    assert "is written by rmspec" in said and field in said


def test_hardware_slurm_on_one_node_is_refused():
    with pytest.raises(SpecError) as caught:
        load_spec(SPECS / "quickstart.yaml", ["hardware.slurm={partition: debug}"])
    assert "hardware.nodes above 1" in " ".join(i.message for i in caught.value.issues)


def test_a_gpu_request_below_the_processes_per_node_or_on_cpu_is_refused():
    with pytest.raises(SpecError) as caught:
        load_spec(SPECS / "ultrafeedback_bt.yaml", ["hardware.slurm={gpus_per_node: 'a100:4'}"])
    assert "fewer GPUs than the 8 processes" in " ".join(i.message for i in caught.value.issues)
    assert "hardware.device is cpu" in _refused("hardware.slurm={gpus_per_node: '2'}")
    with pytest.raises(SpecError):
        load_spec(SPECS / "ultrafeedback_bt.yaml", ["hardware.slurm={gpus_per_node: 'a100:x'}"])


# ------------------------------------------------------------------ device: auto on several nodes

AUTO_2_NODES = ["hardware.device=auto", "hardware.nodes=2"]


def test_several_nodes_with_device_auto_on_a_host_without_gpu_are_refused():
    with pytest.raises(PlanError) as caught:
        _plan("quickstart.yaml", *AUTO_2_NODES)
    said = caught.value.message
    assert "name the device (e.g. `hardware.device: h100-80gb`): this host has no GPU" in said
    assert "hardware.device: cpu" in caught.value.hint  # the CPU job across nodes says so


def test_several_nodes_with_device_auto_on_a_gpu_host_plan_that_gpu():
    host = HostFacts((), 512.0, (("NVIDIA H100 80GB HBM3", 79.6),) * 8, 32)
    plan = _plan("quickstart.yaml", *AUTO_2_NODES, host=host)
    assert plan["hardware"]["is_gpu"] and plan["num_processes"] == 16
    assert "--gpus-per-node=8" in sbatch_options(plan["slurm_script"])


def test_one_node_with_device_auto_on_a_host_without_gpu_still_plans_cpu():
    assert _plan("quickstart.yaml", "hardware.device=auto")["hardware"]["device"] == "cpu"


def test_rmspec_plan_exits_2_with_the_message_on_a_host_without_nvidia_smi(tmp_path):
    # PATH without nvidia-smi: detection finds no GPU here as on a login node.
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "plan", str(SPECS / "quickstart.yaml"), *(f"--set={s}" for s in AUTO_2_NODES)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "this host has no GPU" in done.stderr and "Traceback" not in done.stderr
