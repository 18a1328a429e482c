"""The judge component against a real `rmspec serve` OpenAI route holding a tiny judge: rewards equal
the verdicts parsed from plain transformers greedy generation of the same messages. A second judge
endpoint refuses connections: every row is counted `endpoint_error` and on_failure is applied as
written (a value, or the row rejected), never a silent 0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers.serve_process import REPO, ServeProcess, free_port  # noqa: E402
from helpers.serving import need  # noqa: E402
from rmspec.composite.components.context import Context  # noqa: E402
from rmspec.composite.components.judge import judge_messages  # noqa: E402
from rmspec.composite.outcome import Item  # noqa: E402
from rmspec.composite.scorer import CompositeScorer  # noqa: E402
from rmspec.spec.composite import Composite  # noqa: E402
from rmspec.spec.composite_models import JudgeComponent  # noqa: E402

pytestmark = pytest.mark.slow
TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
ITEMS = [
    Item([{"role": "user", "content": "What is 2 + 2?"}], "4"),
    Item("Name a colour.", "Blue, like the sky on a clear day."),
    Item("Say hi.", "hello there, how are you"),
    Item("Explain rain.", "Water falls from clouds when droplets grow heavy."),
    Item("Count to three.", "one two three"),
]


@pytest.fixture(scope="module")
def judge_run(tmp_path_factory):
    """A 2-layer Llama judge whose replies are digits: its final norm keeps 4 dimensions and its LM
    head scores only the digit tokens, so greedy decoding writes a digit that varies by input."""
    from helpers.models import tiny_judge_parts

    tokenizer, config = tiny_judge_parts(TEMPLATE)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    # The LM head scores digit tokens only, each item's digit along its own direction: the part of
    # its last hidden state that differs from the others' mean, orthogonal to that mean. So the
    # greedy first token is a digit, a different one per item, whatever the random backbone.
    settings = JudgeComponent(**judge_settings("http://unused/v1"))
    states = []
    with torch.no_grad():
        for item in ITEMS:
            text = tokenizer.apply_chat_template(
                judge_messages(settings, settings.rubric, item), tokenize=False, add_generation_prompt=True
            )
            ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
            states.append(model.model(input_ids=ids).last_hidden_state[0, -1])
        mean = torch.stack(states).mean(0)
        unit = mean / mean.norm()
        model.lm_head.weight.zero_()
        for k, h in enumerate(states):
            d = h - mean
            d = d - (d @ unit) * unit
            model.lm_head.weight[tokenizer.convert_tokens_to_ids(str(k + 1))] = 50.0 * d / d.norm()
    run = tmp_path_factory.mktemp("judge") / "run"
    model.save_pretrained(run / "model")
    tokenizer.save_pretrained(run / "model")
    spec = (REPO / "specs" / "judge_generative.yaml").read_text()
    spec = spec.replace("../rmspec/data/demo/judge_messages.jsonl", str(REPO / "rmspec/data/demo/judge_messages.jsonl"))
    (run / "spec.yaml").write_text(spec)
    return run


def judge_settings(base_url: str, **kw) -> dict:
    return {
        "name": "judge",
        "kind": "judge",
        "base_url": base_url,
        "model": "judge",
        "rubric": ["The response answers the question.", "It is brief."],
        "scale": {"min": 0, "max": 9},
        "pattern": r"(\d)",
        "max_tokens": 3,
        "concurrency": 2,
        "timeout_s": 60,
        **kw,
    }


def plain_reply(model_dir: Path, messages: list[dict], max_new_tokens: int) -> str:
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
    return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def composite_of(judge: dict, on_failure=None) -> CompositeScorer:
    section = {"kind": "composite", "components": [judge]}
    if on_failure is not None:
        section["on_failure"] = on_failure
    return CompositeScorer(Composite.model_validate(section), Context())


def test_rewards_are_the_judges_parsed_verdicts(judge_run):
    need("fastapi")
    proc = ServeProcess(judge_run, "--served-model-name", "judge")
    try:
        settings = judge_settings(proc.url + "/v1")
        scorer = composite_of(settings)
        rows = scorer.score_items(ITEMS)
    finally:
        proc.stop()
    principles = settings["rubric"]
    expected = []
    for item in ITEMS:
        reply = plain_reply(judge_run / "model", judge_messages(JudgeComponent(**settings), principles, item), 3)
        expected.append(float(re.findall(r"(\d)", reply)[-1]))  # the reply's last score (the documented rule)
    assert [r.reward for r in rows] == expected
    assert len(set(expected)) > 1, expected  # the verdicts differ between rows: equality means something
    assert scorer.counts.to_json()["components"]["judge"] == {"scored": len(ITEMS), "failed": {}}


def test_refused_connections_are_counted_and_the_policy_applied():
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    valued = composite_of(judge_settings(dead), on_failure={"value": -2.0})
    rows = valued.score_items(ITEMS)
    assert [r.reward for r in rows] == [-2.0] * len(ITEMS)
    assert [r.failures for r in rows] == [{"judge": "endpoint_error"}] * len(ITEMS)
    assert valued.counts.to_json()["components"]["judge"]["failed"] == {"endpoint_error": len(ITEMS)}
    strict = composite_of(judge_settings(dead))  # on_failure: error (the default)
    rows = strict.score_items(ITEMS)
    assert all(r.reward is None and "endpoint_error" in r.error for r in rows)
    assert strict.counts.to_json()["rows_failed"] == len(ITEMS)
    skipped = composite_of(judge_settings(dead), on_failure="skip")
    assert all(r.reward is None and "no weighted component" in r.error for r in skipped.score_items(ITEMS))


def test_replies_without_a_score_are_invalid_output(judge_run):
    need("fastapi")
    proc = ServeProcess(judge_run, "--served-model-name", "judge")
    try:
        scorer = composite_of(judge_settings(proc.url + "/v1", pattern=r"\[\[(\d+)\]\]"), on_failure={"value": 0.0})
        rows = scorer.score_items(ITEMS[:2])
        wrong_model = composite_of(judge_settings(proc.url + "/v1", model="another"), on_failure={"value": 0.0})
        refused = wrong_model.score_items(ITEMS[:1])
    finally:
        proc.stop()
    assert [r.failures for r in rows] == [{"judge": "invalid_output"}] * 2  # digits, never [[n]]
    assert refused[0].failures == {"judge": "endpoint_error"}  # HTTP 404 from the server
