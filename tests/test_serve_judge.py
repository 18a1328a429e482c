"""A generative judge served over the OpenAI chat API and used by `rmspec score`, against plain
transformers greedy generation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers.serve_process import ServeProcess  # noqa: E402
from helpers.serving import need  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def judge_run(tmp_path_factory):
    from helpers.models import tiny_judge_parts

    tokenizer, config = tiny_judge_parts(TEMPLATE)
    torch.manual_seed(0)
    run = tmp_path_factory.mktemp("judge") / "run"
    transformers.LlamaForCausalLM(config).save_pretrained(run / "model")
    tokenizer.save_pretrained(run / "model")
    spec = (REPO / "specs" / "judge_generative.yaml").read_text()
    spec = spec.replace("../rmspec/data/demo/judge_messages.jsonl", str(REPO / "rmspec/data/demo/judge_messages.jsonl"))
    (run / "spec.yaml").write_text(spec.replace("max_new_tokens: 32", "max_new_tokens: 4"))
    return run


def plain_generate(model_dir: Path, messages: list[dict], max_new_tokens: int) -> tuple[str, int]:
    """Plain transformers: the chat template, greedy decoding, the reply decoded."""
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
        )
    return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True), ids.shape[1]


def test_openai_chat_completions_from_a_judge(judge_run):
    openai = need("openai")
    proc = ServeProcess(judge_run, "--served-model-name", "judge")
    try:
        client = openai.OpenAI(base_url=proc.url + "/v1", api_key="unused")
        messages = [
            {"role": "system", "content": "You judge."},
            {"role": "user", "content": "Which is better, A or B?"},
        ]
        reply = client.chat.completions.create(model="judge", messages=messages, max_tokens=3, temperature=0.7)
        expected, prompt_tokens = plain_generate(judge_run / "model", messages, 3)
        assert reply.choices[0].message.content == expected and reply.choices[0].message.role == "assistant"
        assert reply.usage.prompt_tokens == prompt_tokens and reply.object == "chat.completion"
        assert reply.choices[0].finish_reason in ("stop", "length")
        with pytest.raises(openai.BadRequestError):  # vLLM's status for a bad request
            client.chat.completions.create(model="judge", messages=messages, stream=True)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="another", messages=messages)
        status, body, _ = proc.post("/get_reward", {"query": ["x"]})
        assert status == 400 and "generative judge" in body["error"]["message"]
    finally:
        proc.stop()


def test_score_pairs_with_a_judge(cli, judge_run, tmp_path):
    from rmspec.inference.judge import judge_message, parse_verdict

    out = tmp_path / "judged.jsonl"
    result = cli("score", judge_run, FIXTURES / "pairs.jsonl", "--out", out, "--json")
    assert result.code == 0, result.err
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    source = [json.loads(x) for x in (FIXTURES / "pairs.jsonl").read_text().splitlines()]
    assert len(rows) == len(source) and all(list(r)[: len(s)] == list(s) for r, s in zip(rows, source))
    for row, src in zip(rows[:2], source[:2]):
        text, _ = plain_generate(
            judge_run / "model",
            [{"role": "user", "content": judge_message(src["prompt"], src["chosen"], src["rejected"])}],
            4,
        )
        assert row["judge_output"] == text and row["verdict"] == parse_verdict(text, r"\[\[(A|B)\]\]")
    single = tmp_path / "single.jsonl"
    single.write_text(json.dumps({"prompt": "p", "response": "r"}) + "\n")
    result = cli("score", judge_run, single, "--out", tmp_path / "s.jsonl")
    assert result.code == 2 and "compares two responses" in result.err


def plain_generated_ids(model_dir: Path, messages: list[dict], max_new_tokens: int) -> list[int]:
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
        )
    return out[0, ids.shape[1] :].tolist()


def test_usage_and_finish_reason_come_from_the_generated_tokens(judge_run):
    """completion_tokens and finish_reason count the tokens the judge generated (up to and with
    its EOS), not a re-tokenization of the decoded text; max_tokens is honoured up to the context."""
    openai = need("openai")
    model = transformers.AutoModelForCausalLM.from_pretrained(judge_run / "model")
    eos = model.generation_config.eos_token_id
    stops = set(eos if isinstance(eos, list) else [eos])
    proc = ServeProcess(judge_run, "--served-model-name", "judge")
    try:
        client = openai.OpenAI(base_url=proc.url + "/v1", api_key="unused")
        for k, question in enumerate(["Which is better, A or B?", "Pick one: [[A]] or [[B]]", "hello", "x y z"]):
            messages = [{"role": "user", "content": question}]
            budget = 6 + k
            generated = plain_generated_ids(judge_run / "model", messages, budget)
            n = next((i + 1 for i, t in enumerate(generated) if t in stops), len(generated))
            reply = client.chat.completions.create(model="judge", messages=messages, max_tokens=budget)
            assert reply.usage.completion_tokens == n
            assert reply.choices[0].finish_reason == (
                "stop" if n < len(generated) or generated[n - 1] in stops else "length"
            )
        # a budget past the model's context: 400 naming the limit
        with pytest.raises(openai.BadRequestError, match=r"maximum context length is \d+ tokens"):
            client.chat.completions.create(model="judge", messages=messages, max_tokens=4096)
        # within the context, more than the run's max_new_tokens (4): honoured, not capped
        reply = client.chat.completions.create(model="judge", messages=messages, max_tokens=40)
        generated = plain_generated_ids(judge_run / "model", messages, 40)
        assert reply.usage.completion_tokens == next(
            (i + 1 for i, t in enumerate(generated) if t in stops), len(generated)
        )
        body = reply.model_dump()
        assert {"refusal", "tool_calls"} <= set(body["choices"][0]["message"]) and "system_fingerprint" in body
    finally:
        proc.stop()
