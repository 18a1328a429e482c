"""rmspec.messages: one check of chat messages and row text fields, and how data, score and serve
each turn the same bad value into their own outcome (a reject reason, a rejects-file row, a 422)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmspec.messages import STRICT, Invalid, Problem, Rules, conversation, field_value, split_reply, text, text_list

USER, REPLY = {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}


# ---------------------------------------------------------------------- the validator, each problem once


@pytest.mark.parametrize(
    "value, rules, problem, field, index",
    [
        ("q", STRICT, Problem.NOT_MESSAGES, "m", None),
        (5, Rules(allow_text=True), Problem.NOT_TEXT_OR_MESSAGES, "m", None),
        ([], STRICT, Problem.EMPTY_LIST, "m", None),
        ([USER, "hi"], STRICT, Problem.NOT_A_MESSAGE, "m.1", 1),
        ([USER, {"role": "robot", "content": "x"}], STRICT, Problem.BAD_ROLE, "m.1.role", 1),
        ([{"role": "user", "content": 3}], STRICT, Problem.BAD_CONTENT, "m.0.content", 0),
        ([{"role": "user", "content": [{"type": "text", "text": "a"}]}], STRICT, Problem.BAD_CONTENT, "m.0.content", 0),
        (
            [{"role": "user", "content": [{"type": "image"}]}],
            Rules(text_parts=True),
            Problem.BAD_PART,
            "m.0.content.0",
            0,
        ),
    ],
)
def test_each_conversation_problem_names_its_field(value, rules, problem, field, index):
    with pytest.raises(Invalid) as caught:
        conversation(value, "m", rules)
    exc = caught.value
    assert (exc.problem, exc.field, exc.column, exc.index) == (problem, field, "m", index)
    assert str(exc) == f"{field}: {exc.detail}" and exc.detail


def test_what_each_rule_lets_through():
    assert conversation("q", "m", Rules(allow_text=True)) == [USER]
    assert conversation([], "m", Rules(allow_empty=True)) == []
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert conversation(parts, "m", Rules(text_parts=True)) == [{"role": "user", "content": "ab"}]
    extra = [{"role": "system", "content": "s", "name": "x"}, USER]  # only role and content are kept
    assert conversation(extra, "m") == [{"role": "system", "content": "s"}, USER]


@pytest.mark.parametrize(
    "conv, problem, field",
    [
        ([USER], Problem.NO_REPLY, "m.0.role"),
        ([REPLY], Problem.NO_PROMPT, "m"),
        ([USER, {"role": "assistant", "content": "  "}], Problem.EMPTY_REPLY, "m.1.content"),
    ],
)
def test_split_reply_problems(conv, problem, field):
    with pytest.raises(Invalid) as caught:
        split_reply(conv, "m")
    assert (caught.value.problem, caught.value.field) == (problem, field)


def test_split_reply_and_row_fields():
    assert split_reply([USER, REPLY], "m") == ([USER], "a")
    assert field_value({"a": 0}, "a") == 0
    for call, problem in [
        (lambda: field_value({"a": None}, "a"), Problem.MISSING),
        (lambda: field_value({}, "a"), Problem.MISSING),
        (lambda: text(3, "r"), Problem.NOT_TEXT),
        (lambda: text(" ", "r", non_empty=True), Problem.EMPTY_TEXT),
        (lambda: text_list(["a", ""], "s"), Problem.NOT_TEXT_LIST),
        (lambda: text_list([], "s"), Problem.NOT_TEXT_LIST),
    ]:
        with pytest.raises(Invalid) as caught:
            call()
        assert caught.value.problem == problem
    assert text(" ", "r") == " " and text_list(["a", "b"], "s") == ["a", "b"]


# ---------------------------------------------------------------------- one bad value, three outcomes

BAD = [
    # (messages, data reason, score reason, score kind, serve status and param)
    (
        [USER, {"role": "robot", "content": "a"}],
        "wrong_type",
        "'messages' message 1 is not {role: system|user|assistant, content: text}",
        "'messages' is not {role: system|user|assistant, content: text}",
        "messages.1.role",
    ),
    (
        [USER, {"role": "assistant", "content": 3}],
        "wrong_type",
        "'messages' message 1 is not {role: system|user|assistant, content: text}",
        "'messages' is not {role: system|user|assistant, content: text}",
        "messages.1.content",
    ),
    (
        [USER],
        "malformed",
        "'messages' does not end with the assistant reply to score (last role: user)",
        "'messages' does not end with the assistant reply to score",
        "messages.0.role",
    ),
    (
        "just text",
        "malformed",
        "'messages' is not a non-empty list of {role, content} messages",
        "'messages' is not a non-empty list of {role, content} messages",
        "messages",
    ),
]


def _data_reason(messages):
    from rmspec.data.presets import RowMapper
    from rmspec.data.records import Reject

    mapping = SimpleNamespace(preset="messages", binarize=None, pair_by=None, columns=SimpleNamespace(model_dump=dict))
    # the judge section's declared facts (rmspec.spec.approach.ApproachSection): its rows, no tie rows
    # trained, no margin remap, no score attributes
    judge = SimpleNamespace(
        kind="generative", row_kind="generative", tie_rows="reject", margin_table=None, score_attributes=[]
    )
    mapper = RowMapper(mapping, judge, ["messages"])
    with pytest.raises(Reject) as caught:
        mapper({"messages": messages}, 0)
    return caught.value.reason


class _NoModel:
    """A scorer whose rows all get rejected never computes anything."""

    kind = "reward"
    batch_size = 2

    def encode(self, items):
        assert not items
        return []

    def grouped_outputs(self, groups, batch_size=None):
        assert not groups
        return []


def _score_reject(messages):
    from rmspec.score import runner, shapes

    shape = shapes.detect(["messages"], {})
    scored, rejects, _ = runner._score_chunk(_NoModel(), shape, [{"messages": messages}], 7, 2)
    assert scored == [] and len(rejects) == 1
    assert rejects[0]["row"] == 7 and rejects[0]["input"] == {"messages": messages}
    return rejects[0]["reason"], rejects[0]["reason_kind"]


def _serve_error(messages):
    from rmspec.serve.chat import conversation as served
    from rmspec.serve.chat import split_reply as served_split
    from rmspec.serve.request_io import ApiError

    with pytest.raises(ApiError) as caught:
        served_split(served(messages))
    return caught.value.status, caught.value.param, caught.value.message


@pytest.mark.parametrize("messages, data_reason, score_reason, score_kind, serve_param", BAD)
def test_the_same_bad_messages_in_data_score_and_serve(messages, data_reason, score_reason, score_kind, serve_param):
    assert _data_reason(messages) == data_reason
    assert _score_reject(messages) == (score_reason, score_kind)
    status, param, message = _serve_error(messages)
    assert status == 422 and param == serve_param and message.startswith(f"{serve_param}: ")


def test_serve_maps_the_validators_own_words():
    """Serve words every problem as the validator does (field path: detail), so the two cannot drift."""
    for messages in ([], [USER, "x"], [{"role": "user", "content": [{"type": "image"}]}], [REPLY]):
        try:
            split_reply(conversation(messages, "messages", Rules(text_parts=True)), "messages")
        except Invalid as exc:
            expected = (exc.field, str(exc))
        assert _serve_error(messages)[1:] == expected


def test_a_missing_or_wrongly_typed_field_in_data_and_score():
    from rmspec.data.records import Reject
    from rmspec.data.row_values import messages as data_messages
    from rmspec.score import shapes

    with pytest.raises(Reject) as caught:
        data_messages(5, "prompt")
    got = (caught.value.reason, caught.value.detail)
    assert got == ("wrong_type", "prompt must be text or a list of messages, got int")
    single = shapes.detect(["prompt", "response"], {})
    for row, reason in [
        ({"prompt": "p"}, "missing field 'response'"),
        ({"prompt": 5, "response": "r"}, "'prompt' is neither text nor a list of messages (int)"),
        ({"prompt": "p", "response": 3}, "'response' is not text (int)"),
        ({"prompt": "p", "response": " "}, "empty response"),
    ]:
        with pytest.raises(Invalid) as caught:
            single.items(row)
        assert shapes.reason(caught.value)[0] == reason
