"""`rmspec serve` (a real subprocess) called through the RL trainers' own client code, and the
reward each receives compared with `rmspec score` on the same conversation (within 1e-5), for a
ChatML model (Qwen2, Qwen2.5's template), a Llama-3-template model (BOS in the template and added
by the tokenizer) and an encoder (BERT text pairs).

Clients, installed by .ci/install_rl_clients.sh (`pip install --no-deps openrlhf==0.11.2
verl==0.9.1` plus what their client modules import):
- OpenRLHF 0.11.2: `SingleTurnAgentExecutor.execute` builds the query (decode of prompt ids +
  generated ids with the EOS) and posts it with `_fetch_rewards_via_http`. Stubbed: only the vLLM
  engine (`llm_engine.generate` returns the response tokens + EOS, as vLLM does) and its
  SamplingParams (an object with max_tokens and logprobs); no GPU here.
- OpenRLHF 0.9.0's batch client `request_api_wrapper` (openrlhf/utils/remote_rm_utils.py), loaded
  from its own wheel installed beside 0.11.2 with `pip install --target` (two versions of one
  package cannot share a site-packages); it posts a whole rollout batch in one request.
- verl 0.9.1: `RewardLoopWorker.compute_score_disrm` (its `_preprocess_reward_inputs`: decode,
  drop EOS, the reward model's chat template, BOS text stripped; `/classify` with
  `use_activation: false`), directly and through verl's `NaiveRouter` (run with uvicorn in a
  thread). The worker is built without its __init__, which loads tokenizers from a trainer
  config through Ray; the attributes compute_score_disrm reads are set instead. verl refuses a
  tokenizer without a chat template before sending anything, so the encoder goes through the
  other clients only.
- the `openai` package: `client.post("/classify", ...)` as verl's older code and vLLM users do.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers.rl_clients import openrlhf_09_client  # noqa: E402
from helpers.serve_models import build_llama3, build_qwen2_chatml  # noqa: E402
from helpers.serve_process import REPO, ServeProcess, free_port  # noqa: E402
from helpers.serving import build_spread_bert  # noqa: E402

pytestmark = pytest.mark.slow
CONVERSATIONS = [
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
BUILDERS = {
    "qwen2_chatml": build_qwen2_chatml,
    "llama3": build_llama3,
    "bert_pair": lambda d: build_spread_bert(d, mean=None),
}


@pytest.fixture(scope="module", params=list(BUILDERS))
def served(request, tmp_path_factory):
    """(kind, model dir, tokenizer, server, rmspec score's rewards for CONVERSATIONS)."""
    need("fastapi")
    folder = tmp_path_factory.mktemp(request.param)
    model_dir = BUILDERS[request.param](folder / "model")
    rows = folder / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": p, "response": r}) + "\n" for p, r in CONVERSATIONS))
    result = subprocess.run(
        [sys.executable, "-m", "rmspec", "score", str(model_dir), str(rows), "--out", str(folder / "scored.jsonl")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    scored = [json.loads(x)["reward"] for x in (folder / "scored.jsonl").read_text().splitlines()]
    assert max(scored) - min(scored) > 0.05  # the conversations really score differently
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    proc = ServeProcess(model_dir, "--max-wait-ms", "20")
    yield SimpleNamespace(kind=request.param, model_dir=model_dir, tokenizer=tokenizer, server=proc, scored=scored)
    proc.stop()


def _eos(tok) -> int:
    return tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id  # BERT ends a text with [SEP]


def _prompt_text(tok, messages) -> str:
    """The prompt as OpenRLHF's dataset writes it: the chat template with the generation prompt
    (--apply_chat_template); a tokenizer without one: [CLS] prompt [SEP], the encoder's pair."""
    if tok.chat_template:
        return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    text = (
        messages[-1]["content"]
        if len(messages) == 1
        else "\n\n".join(
            f"{ {'system': 'System', 'user': 'User', 'assistant': 'Assistant'}[m['role']] }: {m['content']}"
            for m in messages
        )
    )
    return f"{tok.cls_token} {text} {tok.sep_token}"


class StubVLLM:
    """Only what cannot run here: vLLM's engine. It 'generates' the given response, ending with
    the EOS as vLLM's token_ids do."""

    def __init__(self, tok, response: str):
        self.ids = tok(response, add_special_tokens=False)["input_ids"] + [_eos(tok)]

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        out = SimpleNamespace(token_ids=list(self.ids), text="", finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


def test_openrlhf_0_11_single_turn_executor(served):
    """OpenRLHF 0.11.2's own rollout code path builds the query and fetches the reward."""
    need("openrlhf")
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    tok = served.tokenizer
    executor = SingleTurnAgentExecutor(served.server.url + "/get_reward")

    async def one(messages, response):
        params = SimpleNamespace(max_tokens=64, logprobs=None)
        return await executor.execute(_prompt_text(tok, messages), None, params, 512, tok, StubVLLM(tok, response))

    async def everything():
        return await asyncio.gather(*(one(m, r) for m, r in CONVERSATIONS))

    outputs = asyncio.run(everything())
    rewards = [o["reward"][0] for o in outputs]  # the server's `rewards` list for its one query
    assert all(r is not None for r in rewards), "OpenRLHF got no reward (its client swallows errors)"
    assert rewards == pytest.approx(served.scored, abs=1e-5)
    assert [o["extra_logs"]["truncated"] for o in outputs] == [[0.0]] * len(CONVERSATIONS)


def test_openrlhf_0_9_batch_client(served):
    """OpenRLHF 0.8-0.9 send the whole rollout batch in one request (requests, 180 s, 5 tries)."""
    module = openrlhf_09_client()
    tok = served.tokenizer
    queries, prompts = [], []
    for messages, response in CONVERSATIONS:
        prompt = _prompt_text(tok, messages)
        ids = tok(prompt, add_special_tokens=False)["input_ids"] + StubVLLM(tok, response).ids
        queries.append(tok.decode(ids, skip_special_tokens=False))
        prompts.append(prompt)
    # A rollout batch: 64 copies of each conversation in one request.
    answer = module.request_api_wrapper(
        served.server.url + "/get_reward",
        {"query": queries * 64, "prompts": prompts * 64, "labels": [None] * 64 * len(queries)},
    )
    assert answer["rewards"] == pytest.approx(served.scored * 64, abs=1e-5)


def _verl_worker(served, address: str):
    need("verl")
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker.__new__(RewardLoopWorker)  # see the module docstring
    worker.config = OmegaConf.create(
        {"reward": {"reward_model": {"rollout": {"name": "vllm"}, "model_path": str(served.model_dir)}}}
    )
    worker.reward_router_address = address
    worker.input_tokenizer = worker.reward_model_tokenizer = served.tokenizer
    return worker


def _verl_item(tok, messages, response):
    import numpy as np
    from verl.protocol import DataProto

    prompt_ids = tok(
        tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False), add_special_tokens=False
    )["input_ids"]
    response_ids = StubVLLM(tok, response).ids + [tok.pad_token_id] * 3  # right-padded, as verl's rollout batch
    mask = [1] * len(prompt_ids) + [1] * (len(response_ids) - 3) + [0] * 3
    return DataProto.from_dict(
        tensors={"responses": torch.tensor([response_ids]), "attention_mask": torch.tensor([mask])},
        non_tensors={"raw_prompt": np.array([messages], dtype=object)},
    )


def _verl_rewards(served, address: str) -> list[float]:
    worker = _verl_worker(served, address)

    async def everything():
        return await asyncio.gather(
            *(worker.compute_score_disrm(_verl_item(served.tokenizer, m, r)) for m, r in CONVERSATIONS)
        )

    return [o["reward_score"] for o in asyncio.run(everything())]


def test_verl_compute_score_disrm(served):
    if not served.tokenizer.chat_template:
        worker = _verl_worker(served, served.server.url.removeprefix("http://"))
        # verl's own limit: it needs an EOS on the policy tokenizer and the reward model's chat
        # template (TypeError / ValueError inside _preprocess_reward_inputs, before any request)
        with pytest.raises((ValueError, TypeError)):
            asyncio.run(worker.compute_score_disrm(_verl_item_without_template(served.tokenizer)))
        return
    rewards = _verl_rewards(served, served.server.url.removeprefix("http://"))
    assert rewards == pytest.approx(served.scored, abs=1e-5)


def _verl_item_without_template(tok):
    import numpy as np
    from verl.protocol import DataProto

    ids = tok("a question", add_special_tokens=False)["input_ids"]
    return DataProto.from_dict(
        tensors={"responses": torch.tensor([ids]), "attention_mask": torch.tensor([[1] * (2 * len(ids))])},
        non_tensors={"raw_prompt": np.array([[{"role": "user", "content": "q"}]], dtype=object)},
    )


def test_verl_through_its_naive_router(served):
    if not served.tokenizer.chat_template:
        pytest.skip("verl needs the reward model's chat template (tested in test_verl_compute_score_disrm)")
    need("verl")
    import uvicorn
    from verl.experimental.reward_loop.router.naive_router import NaiveRouter

    router = NaiveRouter(worker_urls=[served.server.url])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(router.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started
        assert _verl_rewards(served, f"127.0.0.1:{port}") == pytest.approx(served.scored, abs=1e-5)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_openai_package_classify(served):
    openai = need("openai")
    import httpx

    tok = served.tokenizer
    client = openai.OpenAI(base_url=served.server.url, api_key="unused")
    for (messages, response), expected in zip(CONVERSATIONS, served.scored):
        # vLLM's chat form: the conversation, laid out on the server as training laid it out.
        body = {
            "model": str(served.model_dir),
            "messages": [*messages, {"role": "assistant", "content": response}],
            "use_activation": False,
        }
        out = client.post("/classify", cast_to=httpx.Response, body=body).json()
        assert out["data"][-1]["probs"][-1] == pytest.approx(expected, abs=1e-5)
        # vLLM's text form with its default add_special_tokens=True, the text as a client decodes it.
        prompt = _prompt_text(tok, messages)
        text = tok.decode(
            tok(prompt, add_special_tokens=False)["input_ids"] + StubVLLM(tok, response).ids, skip_special_tokens=False
        )
        out = client.post(
            "/classify",
            cast_to=httpx.Response,
            body={"model": str(served.model_dir), "input": text, "use_activation": False},
        ).json()
        assert out["data"][-1]["probs"][-1] == pytest.approx(expected, abs=1e-5)
    with pytest.raises(openai.NotFoundError):
        client.post("/classify", cast_to=httpx.Response, body={"model": "not-this-one", "input": "x"})
    with pytest.raises(openai.BadRequestError):
        client.post("/classify", cast_to=httpx.Response, body={"input": 5})
    assert sys.modules.get("vllm") is None  # nothing here needed vLLM itself
