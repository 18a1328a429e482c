"""The plan of a process reward model: a token-classification head that costs 2h + 2 parameters,
and the separator check (how it tokenizes, a PlanError when it gives no token), all without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_separator_check_and_head_size_without_torch(tmp_path):
    code = (
        "import sys\n"
        "from rmspec.spec import load_spec\n"
        "from rmspec.plan import compile_plan\n"
        "from rmspec.errors import PlanError\n"
        f"loaded = load_spec({str(REPO / 'specs' / 'quickstart_prm.yaml')!r})\n"
        "plan = compile_plan(loaded).to_json()\n"
        "sep = plan['step_separator']\n"
        "assert sep['tokens'] == [';'] and sep['ids'] == [1025], sep\n"
        "print(plan['model']['trained_parameters'])\n"
        f"bad = load_spec({str(REPO / 'specs' / 'quickstart_prm.yaml')!r}, "
        + r"""sets=['approach.step_separator="\\n"'])"""
        + "\n"
        "try:\n"
        "    compile_plan(bad)\n"
        "    raise SystemExit('no PlanError for a newline separator with a BERT tokenizer')\n"
        "except PlanError as exc:\n"
        "    assert 'tokenizes to nothing' in exc.message and 'step_separator' in exc.hint\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'accelerate') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # the head the plan counts is the one transformers builds: BertForTokenClassification, 2 labels, no pooler
    from transformers import AutoModelForTokenClassification

    from rmspec.packaged import resolve_model_path

    model = AutoModelForTokenClassification.from_pretrained(
        resolve_model_path("sentence-transformers/all-MiniLM-L6-v2"), num_labels=2
    )
    assert int(out.stdout.split()[-1]) == sum(p.numel() for p in model.parameters())


def test_init_process_points_at_the_demo_data_and_benchmark(cli, tmp_path):
    from rmspec.spec import load_spec

    out = tmp_path / "a" / "b" / "prm.yaml"
    out.parent.mkdir(parents=True)
    assert cli("init", "--approach", "process", "-o", out).code == 0
    loaded = load_spec(out)
    spec = loaded.spec
    assert spec.approach.kind == "process" and spec.data.mapping.preset == "stepwise"
    assert (
        loaded.base_dir / spec.data.source.paths[0]
    ).resolve() == REPO / "rmspec" / "data" / "demo" / "prm_steps.jsonl"
    bench = spec.eval.benchmarks[0]
    assert bench.kind == "processbench"
    assert (loaded.base_dir / bench.path).resolve() == REPO / "rmspec" / "data" / "demo" / "prm_processbench.jsonl"
