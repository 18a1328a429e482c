"""A composite reward through `rmspec serve` (a real subprocess) and the RL trainers' own client
code, against `rmspec score` on the same rows; math-verify past its limit while the server keeps
answering; failures counted in extra_logs and /metrics."""

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
need("math_verify")

from helpers.composite import MATH_ROWS, composite_section, write_composite_run, write_math_rows  # noqa: E402
from helpers.serve_models import build_qwen2_chatml, metric  # noqa: E402
from helpers.serve_process import REPO, ServeProcess  # noqa: E402
from helpers.serving import need  # noqa: E402

pytestmark = pytest.mark.slow


def score_rows(run, rows_path, out):
    result = subprocess.run(
        [sys.executable, "-m", "rmspec", "score", str(run), str(rows_path), "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), [json.loads(x) for x in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    need("fastapi")
    folder = tmp_path_factory.mktemp("composite")
    model_dir = build_qwen2_chatml(folder / "model")
    # a generous limit: on a contended machine a 5 s check can time out and change one side only
    run = write_composite_run(folder / "run", composite_section(model_dir, math_timeout=60))
    summary, scored = score_rows(run, write_math_rows(folder / "rows.jsonl"), folder / "scored.jsonl")
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    proc = ServeProcess(run)
    yield SimpleNamespace(run=run, tokenizer=tokenizer, server=proc, scored=scored, summary=summary)
    proc.stop()


def test_score_output_reconciles(served):
    rows = served.scored
    assert len(rows) == len(MATH_ROWS)  # on_failure value: nothing rejected
    assert [r["fmt"] for r in rows] == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert [r["math_error"] for r in rows] == [None, None, None, None, "parse_error", "no_reference", None]
    assert rows[3]["reward"] == -1.0 and rows[3]["gate"] == "fmt"  # unformatted: the floor
    # by hand: weighted sum of math (failed: 0.0 by the policy), repetition and the model's reward
    for r in rows[:3] + rows[4:]:
        assert r["reward"] == pytest.approx((r["math"] or 0.0) + 0.5 * r["rep"] + 0.25 * r["rm"], abs=1e-9)
    failed = served.summary["failures"]["components"]["math"]["failed"]
    assert failed == {"parse_error": 1, "no_reference": 1}


def build_qwen2_tokenizer(directory):
    """The chat tokenizer of the tiny Qwen2 (verl decodes the rollout with it)."""
    return transformers.AutoTokenizer.from_pretrained(build_qwen2_chatml(directory))


def _prompt(tok, question):
    return tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False)


class StubVLLM:
    """vLLM's engine, which cannot run here: it 'generates' the given response and its EOS."""

    def __init__(self, tok, response: str):
        self.ids = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        out = SimpleNamespace(token_ids=list(self.ids), text="", finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


def _openrlhf_rewards(executor_target, tok):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(executor_target)

    async def one(question, response, label):
        params = SimpleNamespace(max_tokens=256, logprobs=None)
        return await executor.execute(_prompt(tok, question), label, params, 1024, tok, StubVLLM(tok, response))

    async def everything():
        return await asyncio.gather(*(one(q, r, ref) for q, r, ref in MATH_ROWS))

    return asyncio.run(everything())


def test_openrlhf_executor_sends_labels(served):
    need("openrlhf")
    outputs = _openrlhf_rewards(served.server.url + "/get_reward", served.tokenizer)
    rewards = [o["reward"][0] for o in outputs]
    assert all(r is not None for r in rewards), "OpenRLHF got no reward (its client swallows errors)"
    assert rewards == pytest.approx([r["reward"] for r in served.scored], abs=1e-6)
    for name in ("fmt", "math", "rep", "rm"):  # per-component values in extra_logs, as score's columns
        logged = [o["extra_logs"][name][0] for o in outputs]
        assert logged == pytest.approx([r[name] if r[name] is not None else 0.0 for r in served.scored], abs=1e-6)
    assert [o["extra_logs"].get("math_no_reference", [0.0])[0] for o in outputs] == [0, 0, 0, 0, 0, 1, 0]
    assert [o["extra_logs"].get("math_parse_error", [0.0])[0] for o in outputs] == [0, 0, 0, 0, 1, 0, 0]
    status, body = served.server.get("/metrics")
    assert status == 200
    assert metric(body, "rmspec_component_failures_total", component="math", reason="no_reference") >= 1
    assert metric(body, "rmspec_component_failures_total", component="math", reason="parse_error") >= 1


def test_exported_openrlhf_reward_func(served, tmp_path):
    """`rmspec export RUN --to openrlhf`: OpenRLHF loads the .py file as --reward.remote_url and calls it."""
    need("openrlhf")
    out = tmp_path / "reward_func.py"
    result = subprocess.run(
        [sys.executable, "-m", "rmspec", "export", str(served.run), "--to", "openrlhf", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    os.environ["RMSPEC_REWARD_URL"] = served.server.url
    try:
        outputs = _openrlhf_rewards(str(out), served.tokenizer)
    finally:
        del os.environ["RMSPEC_REWARD_URL"]
    assert [o["reward"][0] for o in outputs] == pytest.approx([r["reward"] for r in served.scored], abs=1e-6)


def test_timeout_counted_while_server_answers(tmp_path):
    need("fastapi")
    limit = 3.0  # room on a loaded machine: the quick request must end while the hanging one still runs
    run = write_composite_run(tmp_path / "run", composite_section(math_timeout=limit))
    proc = ServeProcess(run)
    try:
        fmt = "<think>t</think><answer>{}</answer>"
        warm = {"query": ["q" + fmt.format("$2$")] * 2, "prompts": ["q"] * 2, "labels": ["2"] * 2}
        assert proc.post("/get_reward", warm)[1]["rewards"] == [1.0, 1.0]  # both pool workers started
        hang = {"query": ["q" + fmt.format("\\boxed{9^{9^{9^{9^{9}}}}}")], "prompts": ["q"], "labels": ["$1$"]}
        answer = {}

        def slow() -> None:
            started = time.monotonic()
            answer["body"] = proc.post("/get_reward", hang)[1]
            answer["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=slow)
        thread.start()
        time.sleep(0.3)
        started = time.monotonic()
        status, body, _ = proc.post(
            "/get_reward", {"query": ["q" + fmt.format("$3$")], "prompts": ["q"], "labels": ["3"]}
        )
        quick = time.monotonic() - started
        hanging = thread.is_alive()  # the quick request did not wait for the hanging one to end
        thread.join(timeout=60)
        assert status == 200 and body["rewards"] == [1.0] and hanging and quick < limit, (status, body, quick)
        assert answer["body"]["extra_logs"]["math_timeout"] == [1.0], answer
        assert answer["body"]["rewards"] == [0.0]  # on_failure value 0.0, counted, not a silent 0
        assert answer["seconds"] < limit + 3.0, answer["seconds"]  # stopped at its limit, not run to the end
        _, text = proc.get("/metrics")
        assert metric(text, "rmspec_component_failures_total", component="math", reason="timeout") == 1.0
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def rules_served(tmp_path_factory):
    """A composite of rules only: verl's compute_score sees the response without its prompt."""
    need("fastapi")
    folder = tmp_path_factory.mktemp("rules")
    run = write_composite_run(folder / "run", composite_section(math_timeout=60))
    _, scored = score_rows(run, write_math_rows(folder / "rows.jsonl"), folder / "scored.jsonl")
    proc = ServeProcess(run)
    yield SimpleNamespace(run=run, server=proc, scored=scored, folder=folder)
    proc.stop()


def test_verl_reward_manager_calls_the_exported_compute_score(rules_served, tmp_path):
    """verl 0.9.1's NaiveRewardManager with the file `rmspec export --to verl` wrote, loaded by verl's
    own get_custom_reward_fn: each row's reward (at its last response token) equals rmspec score."""
    need("verl")
    import numpy as np
    from omegaconf import OmegaConf
    from verl.protocol import DataProto
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.naive import NaiveRewardManager

    out = tmp_path / "compute_score.py"
    result = subprocess.run(
        [sys.executable, "-m", "rmspec", "export", str(rules_served.run), "--to", "verl", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    tok = build_qwen2_tokenizer(tmp_path / "tok")
    config = OmegaConf.create({"reward": {"custom_reward_function": {"path": str(out), "name": "compute_score"}}})
    os.environ["RMSPEC_REWARD_URL"] = rules_served.server.url
    try:
        manager = NaiveRewardManager(tok, num_examine=0, compute_score=get_custom_reward_fn(config))
        prompts = [tok(_prompt(tok, q), add_special_tokens=False)["input_ids"] for q, _, _ in MATH_ROWS]
        responses = [tok(r, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for _, r, _ in MATH_ROWS]
        p_len, r_len = max(map(len, prompts)), max(map(len, responses)) + 2
        pad = tok.pad_token_id
        batch_prompts = [[pad] * (p_len - len(p)) + p for p in prompts]  # left-padded, as verl's rollout
        batch_responses = [r + [pad] * (r_len - len(r)) for r in responses]  # right-padded
        mask = [
            [0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
            for p, r in zip(prompts, responses)
        ]
        data = DataProto.from_dict(
            tensors={
                "prompts": torch.tensor(batch_prompts),
                "responses": torch.tensor(batch_responses),
                "attention_mask": torch.tensor(mask),
            },
            non_tensors={
                "data_source": np.array(["math"] * len(MATH_ROWS), dtype=object),
                "reward_model": np.array([{"ground_truth": ref} for _, _, ref in MATH_ROWS], dtype=object),
            },
        )
        answer = manager(data, return_dict=True)
    finally:
        del os.environ["RMSPEC_REWARD_URL"]
    rewards = [answer["reward_tensor"][i, len(r) - 1].item() for i, r in enumerate(responses)]
    assert rewards == pytest.approx([r["reward"] for r in rules_served.scored], abs=1e-6)
    info = answer["reward_extra_info"]
    assert info["math_failed"] == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]  # parse_error, no_reference: counted
    assert info["fmt"] == [r["fmt"] for r in rules_served.scored]


def test_refused_and_bad_requests(rules_served):
    status, body, _ = rules_served.server.post("/get_reward", {"query": ["x"], "labels": ["1"]})
    assert status == 422 and "prompts" in body["error"]["message"]
    status, body, _ = rules_served.server.post("/get_reward", {"query": ["qx"], "prompts": ["q"]})
    assert status == 422 and "labels" in body["error"]["message"]
    status, body, _ = rules_served.server.post("/classify", {"input": "x"})
    assert status == 400 and "/get_reward" in body["error"]["message"]


def test_openrlhf_0_9_batch_client_sends_labels(served):
    """OpenRLHF 0.8-0.9 post a whole rollout batch with its labels in one request."""
    from helpers.rl_clients import openrlhf_09_client

    module = openrlhf_09_client()
    tok = served.tokenizer
    prompts = [_prompt(tok, q) for q, _, _ in MATH_ROWS]
    queries = [
        tok.decode(tok(p, add_special_tokens=False)["input_ids"] + StubVLLM(tok, r).ids, skip_special_tokens=False)
        for p, (_, r, _) in zip(prompts, MATH_ROWS)
    ]
    labels = [ref for _, _, ref in MATH_ROWS]
    answer = module.request_api_wrapper(
        served.server.url + "/get_reward", {"query": queries * 8, "prompts": prompts * 8, "labels": labels * 8}
    )
    assert answer["rewards"] == pytest.approx([r["reward"] for r in served.scored] * 8, abs=1e-6)
    assert answer["extra_logs"]["math_no_reference"] == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0] * 8
