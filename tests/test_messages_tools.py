"""Tool messages and assistant tool calls in rmspec.messages (`Rules.tools`), and the check that a
chat template rendered them (`missing_tool_texts`): a template without tool support drops them."""

from __future__ import annotations

import pytest

from helpers.data import chat_tokenizer
from rmspec.messages import STRICT, Invalid, Problem, Rules, conversation, missing_tool_texts

TOOLS = Rules(tools=True)
# Modelled on Qwen2.5's tool format: calls as <tool_call> JSON, results as <tool_response> in a user turn.
QWEN_TOOLS = (
    "{% for m in messages %}"
    "{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
    '{% for c in m.tool_calls or [] %}\n<tool_call>\n{"name": "{{ c.function.name }}", "arguments": '
    "{{ c.function.arguments | tojson }}}\n</tool_call>{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CONV = [
    {"role": "user", "content": "weather in Paris ?"},
    {
        "role": "assistant",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
        ],
    },
    {"role": "tool", "name": "get_weather", "content": "sunny 21C"},
    {"role": "assistant", "content": "It is sunny ."},
]


def test_tool_messages_pass_with_tools_and_are_refused_without():
    out = conversation(CONV, "messages", TOOLS)
    assert out[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
        ],
    }
    assert out[2] == {"role": "tool", "content": "sunny 21C", "name": "get_weather"}
    with pytest.raises(Invalid) as err:
        conversation(CONV, "messages", STRICT)
    assert (err.value.problem, err.value.field) == (Problem.BAD_CONTENT, "messages.1.content")


@pytest.mark.parametrize(
    "calls, path",
    [
        ([], "messages.1.tool_calls"),
        ("get_weather", "messages.1.tool_calls"),
        ([{"type": "function", "function": {"arguments": {}}}], "messages.1.tool_calls.0"),
        ([{"type": "function", "function": {"name": "f", "arguments": 3}}], "messages.1.tool_calls.0"),
        ([{"type": "code", "function": {"name": "f"}}], "messages.1.tool_calls.0"),
    ],
)
def test_malformed_tool_calls_are_located(calls, path):
    conv = [CONV[0], {"role": "assistant", "content": None, "tool_calls": calls}]
    with pytest.raises(Invalid) as err:
        conversation(conv, "messages", TOOLS)
    assert (err.value.problem, err.value.field) == (Problem.BAD_TOOL_CALLS, path)


def test_a_template_that_drops_tools_is_detected():
    conv = conversation(CONV, "messages", TOOLS)
    tok = chat_tokenizer(["weather in Paris sunny"])
    plain_chatml = tok.apply_chat_template(conv, tokenize=False)
    missing = missing_tool_texts(conv, plain_chatml)
    # ChatML renders the tool turn as text but drops the call: its name is missing (the argument
    # values happen to appear elsewhere, "Paris" in the question and "2" in "21C": a substring check)
    assert missing == [("1.tool_calls.0", "get_weather")]
    tok.chat_template = QWEN_TOOLS
    rendered = tok.apply_chat_template(conv, tokenize=False)
    assert '"arguments": {"city": "Paris", "days": 2}' in rendered and "sunny 21C" in rendered
    assert missing_tool_texts(conv, rendered) == []
