"""`rmspec export RUN --to vllm` for process reward models (issue 48 item 4; rmspec.export.vllm_steps).

A tiny Llama PRM (Llama-3 template, head_dim 64: vLLM's CPU attention refuses 16) trained once by `rmspec run`
on arithmetic steps; its export names the step read points (rmspec_export.json `steps`, README.md) and ships
prm_client.py. Without vLLM: the client's token ids and read points are built again by hand from the tokenizer,
and its rewards (vLLM's /pooling answered by plain transformers' head on the ids it posts) equal `rmspec
score`'s step_scores; a plain-layout PRM and a TRL-saved one (no rmspec config) encode as rmspec does; an
architecture vLLM has no token classifier for is exit 2. With vLLM (ONE engine start): `--check` on the run's
held-out rows passes at 1e-4 in both forms (the client, and `rmspec serve --engine vllm`'s engine code), and
its per-step vLLM rewards equal the `rmspec score` this test runs itself.

The vLLM test skips where the vLLM venv is missing (RMSPEC_VLLM_PYTHON, else /opt/rmspec-vllm/bin/python),
and fails under CI=true, where .ci/install_vllm.sh installs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers.ci import missing, need
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

torch = need("torch")
transformers = need("transformers")

from helpers.serve_models import build_llama3  # noqa: E402
from helpers.serve_process import REPO  # noqa: E402

pytestmark = pytest.mark.slow
TOL = 1e-4
CLIENT_FORM = "prm_client.py (its token ids, /pooling token_classify)"
ENGINE_FORM = "rmspec serve --engine vllm (rmspec's token ids, token_classify)"


def rmspec(*args: str, cwd: Path = REPO, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def step_rows(n: int = 32) -> list[dict]:
    """TRL's stepwise rows: sums, every other one wrong from its second step."""
    rng = random.Random(0)
    rows = []
    for i in range(n):
        a, b, wrong = rng.randint(1, 9), rng.randint(1, 9), i % 2
        steps = [f"Add {a} and {b}.", f"{a} + {b} = {a + b + wrong}.", f"The answer is {a + b + wrong}."]
        rows.append(
            {"id": f"p{i}", "prompt": f"What is {a} + {b}?", "completions": steps, "labels": [1, 1 - wrong, 1 - wrong]}
        )
    return rows


@pytest.fixture(scope="module")
def prm_run(tmp_path_factory) -> Path:
    """`rmspec run` of a process reward model (2 steps: the weights only need to be the run's own)."""
    folder = tmp_path_factory.mktemp("prm_run")
    base = build_llama3(folder / "base", hidden_size=128, intermediate_size=256)
    (folder / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in step_rows()))
    spec = {
        "version": 1,
        "name": "prm",
        "model": {"name_or_path": str(base)},
        "data": {
            "source": {"kind": "files", "paths": ["steps.jsonl"]},
            "mapping": {"preset": "stepwise"},
            "split": {"validation_fraction": 0.25, "seed": 0},
        },
        "approach": {"kind": "process"},
        "training": {"max_steps": 2, "global_batch_size": 8, "max_length": 128, "learning_rate": 3e-3},
        "hardware": {"device": "cpu"},
        "eval": {"validation": True, "benchmarks": []},
        "output": {"dir": str(folder / "runs" / "prm"), "report": []},
    }
    (folder / "spec.yaml").write_text(json.dumps(spec))
    done = rmspec("run", str(folder / "spec.yaml"), cwd=folder)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return folder / "runs" / "prm"


@pytest.fixture(scope="module")
def exported(prm_run: Path) -> Path:
    out = prm_run.parent / "vllm"
    done = rmspec("export", str(prm_run), "--to", "vllm", "-o", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "prm_client.py (per-step rewards)" in done.stderr
    return out


@pytest.fixture(scope="module")
def held_out(prm_run: Path) -> list[dict]:
    """The run's validation rows as written, and `rmspec score`'s step_scores of each (torch, float32)."""
    import datasets

    fingerprint = json.loads((prm_run / "data_report.json").read_text())["fingerprint"]
    split = datasets.load_from_disk(str(prm_run / "cache" / fingerprint / "validation"))
    rows = [
        {
            "id": r["id"],
            "prompt": [{"role": m["role"], "content": m["content"]} for m in r["prompt_messages"]],
            "steps": r["steps"],
        }
        for r in split
    ]
    path = prm_run.parent / "held_out.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = rmspec("score", str(prm_run), str(path), "--out", str(prm_run.parent / "scored.jsonl"))
    assert done.returncode == 0, done.stderr[-2000:]
    scored = {s["id"]: s for s in map(json.loads, (prm_run.parent / "scored.jsonl").read_text().splitlines())}
    for row in rows:
        row["step_scores"], row["first_error"] = scored[row["id"]]["step_scores"], scored[row["id"]]["first_error"]
    assert len(rows) >= 4 and all(len(r["step_scores"]) == 3 for r in rows)
    return rows


def load_client(folder: Path) -> ModuleType:
    """prm_client.py imported from the folder, as a user's program imports it."""
    spec = importlib.util.spec_from_file_location(f"prm_client_{abs(hash(folder))}", folder / "prm_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def transformers_pooling(folder: Path):
    """vLLM's /pooling token_classify answered by plain transformers' head on the posted ids (raw outputs)."""
    model = transformers.AutoModelForTokenClassification.from_pretrained(folder).eval()

    def post(body: dict, url: str) -> dict:
        assert body["task"] == "token_classify" and body["use_activation"] is False
        data = []
        for index, ids in enumerate(body["input"]):
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids])).logits[0]
            data.append({"index": index, "data": logits.tolist()})
        return {"data": data}

    return post


# ---------------------------------------------------------------------- without vLLM


def test_the_folder_names_the_read_points(exported: Path) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(exported)
    facts = json.loads((exported / "rmspec_export.json").read_text())
    assert facts["architecture"] == "LlamaForTokenClassification"
    assert json.loads((exported / "config.json").read_text())["architectures"] == ["LlamaForTokenClassification"]
    steps = facts["steps"]
    assert steps["layout"] == "template" and steps["separator"] == "\n" and steps["max_length"] == 128
    assert steps["separator_ids"] == tok("\n", add_special_tokens=False)["input_ids"]
    readme = (exported / "README.md").read_text()
    assert '"task": "token_classify"' in readme and "read point" in readme and "prm_client.py" in readme
    assert "--max-model-len 128" in (exported / "serve.sh").read_text()


def test_the_client_reads_rmspec_scores_steps(exported: Path, held_out: list[dict], monkeypatch) -> None:
    """The client's ids and read points, rebuilt by hand from the tokenizer; its rewards from the head's raw
    outputs at those points equal `rmspec score`'s step_scores and first_error."""
    client = load_client(exported)
    tok = transformers.AutoTokenizer.from_pretrained(exported)
    enc = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    for row in held_out:
        ids = enc(tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True))
        points = []
        for step in row["steps"]:
            ids = ids + enc(step) + enc("\n")
            points.append(len(ids) - 1)
        assert client.encode(tok, row["prompt"], row["steps"]) == (ids, points)
    monkeypatch.setattr(client, "_post", transformers_pooling(exported))
    answers = client.step_rewards([(r["prompt"], r["steps"]) for r in held_out], tokenizer=tok)
    for row, got in zip(held_out, answers):
        assert got["step_scores"] == pytest.approx(row["step_scores"], abs=1e-5)
        assert got["first_error"] == row["first_error"] and got["truncated"] is False


def small_prm(folder: Path, saved: dict | None) -> Path:
    """A 1-layer Llama token classifier (hidden 32: never served here). `saved`: its config's rmspec block, with
    a word-level tokenizer; None: TRL's PRMTrainer folder, with Llama-3's BPE tokenizer (a BOS; "\n" a token)."""
    from helpers.models import build_tokenizer, tiny_llama_config

    if saved is None:
        build_llama3(folder)
        config = transformers.AutoConfig.from_pretrained(folder)
        config.num_labels, config.num_hidden_layers = 2, 1
    else:
        tok = build_tokenizer(folder, unk=True)
        config = tiny_llama_config(
            vocab_size=len(tok),
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=64,
            num_labels=2,
            pad_token_id=0,
        )
    torch.manual_seed(3)
    model = transformers.AutoModelForTokenClassification.from_config(config)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 2.0)
    if saved is not None:
        model.config.update({"rmspec": saved})
    model.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("saved", [{"step_separator": " w79", "threshold": 0.5, "chat_template": "plain"}, None])
def test_plain_and_trl_layouts_are_read_where_rmspec_reads_them(tmp_path: Path, saved, monkeypatch) -> None:
    """rmspec's plain layout and TRL's (a folder without rmspec's config, separator "\\n"): the client's ids and
    read points are rmspec's own (StepEngine.encode), its rewards rmspec's step scores, and steps past
    max_length are dropped whole by both."""
    from rmspec.inference.process import StepEngine

    folder = small_prm(tmp_path / "prm", saved)
    out = tmp_path / "vllm"
    done = rmspec("export", str(folder), "--to", "vllm", "-o", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((out / "rmspec_export.json").read_text())["steps"]["layout"] == ("plain" if saved else "trl")
    client, engine = load_client(out), StepEngine.load(folder)
    long_steps = [f"w{k} w{k + 1} w{k + 2}" for k in range(0, 240, 3)]  # past max_length (64; 512)
    items = [
        ("w1 w2", ["w3 w4", "w5", "w6 w7"]),
        ([{"role": "system", "content": "w9"}, {"role": "user", "content": "w8"}], ["w9"]),
        ("w3", long_steps),
    ]
    for (prompt, steps), enc in zip(items, engine.encode(items)):
        assert client.encode(engine.tokenizer, prompt, steps) == (enc.ids, enc.ends)
    monkeypatch.setattr(client, "_post", transformers_pooling(folder))
    answers = client.step_rewards(items, tokenizer=engine.tokenizer)
    for got, want in zip(answers, engine.score_steps(items)):
        assert got["step_scores"] == pytest.approx(want.scores, abs=1e-5)
        assert got["first_error"] == want.prediction
    assert answers[2]["truncated"] is True and 0 < answers[2]["steps_scored"] < len(long_steps)


def test_an_architecture_vllm_has_no_token_classifier_for_is_exit_2(tmp_path: Path) -> None:
    from helpers.models import build_tokenizer

    folder = tmp_path / "gpt2"
    tok = build_tokenizer(folder, unk=True)
    config = transformers.GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=64, num_labels=2)
    model = transformers.GPT2ForTokenClassification(config)
    model.config.update({"bos_token_id": None, "eos_token_id": None, "rmspec": {"step_separator": " w79"}})
    model.save_pretrained(folder)
    done = rmspec("export", str(folder), "--to", "vllm", "-o", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert "cannot export GPT2ForTokenClassification to vLLM" in done.stderr
    assert "no token-classification model" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_check_rows_of_a_process_model_are_prompt_and_steps(tmp_path: Path) -> None:
    from rmspec.errors import RmspecError
    from rmspec.export.check_step_rows import step_check_rows

    good = tmp_path / "rows.jsonl"
    good.write_text(json.dumps({"problem": "w1", "steps": ["w2", "w3"]}) + "\n")
    rows = step_check_rows(tmp_path, good, 8).rows
    assert rows[0].score_row() == {"id": "1", "prompt": "w1", "steps": ["w2", "w3"]}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "w1", "response": "w2"}) + "\n")
    with pytest.raises(RmspecError, match=r"bad.jsonl:1: not a process check row"):
        step_check_rows(tmp_path, bad, 8)


# ---------------------------------------------------------------------- the real vLLM engine (one start)


def test_check_compares_every_step_with_rmspec_score(prm_run: Path, exported: Path, held_out: list[dict]) -> None:
    """`--check` on the run's held-out rows: vLLM's per-step rewards through the client and through `rmspec
    serve --engine vllm`'s engine code within 1e-4 of `rmspec score` (fp32); checked again here against the
    step_scores this test's own `rmspec score` gave."""
    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")
    done = rmspec(
        "export",
        str(prm_run),
        "--to",
        "vllm",
        "-o",
        str(exported),
        "--overwrite",
        "--check",
        "--vllm-python",
        VLLM_PYTHON,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "parity passed" in done.stdout
    report = json.loads((prm_run / "export_vllm_check.json").read_text())
    assert "the run's validation split" in report["rows_source"] and report["dtype"] == "float32"
    assert set(report["per_form"]) == {CLIENT_FORM, ENGINE_FORM}
    assert max(report["per_form"].values()) <= TOL and report["passed"] is True
    assert report["steps_compared"] == sum(len(r["step_scores"]) for r in held_out)
    ours = {r["id"]: r for r in held_out}
    used = [ours[u["id"]] for u in report["rows_used"]]
    assert len(used) == len(held_out)
    for form in (CLIENT_FORM, ENGINE_FORM):
        for row, got in zip(used, report["vllm"][form]):
            assert got == pytest.approx(row["step_scores"], abs=TOL)
        assert report["same_first_error"][form] == len(used)
    # both forms really went to vLLM: one /pooling request each
    assert (exported / "vllm_check.log").read_text().count('"POST /pooling HTTP/1.1" 200') == 2
