"""Tool turns end to end: conversational rows with `tool` messages and assistant tool calls pass the
data stage (malformed calls are located rejects), survive Arrow storage unchanged, are laid out by a
chat template that renders them (a template that drops them makes a `template_drops_tools` reject,
a scoring reject and a 422) or in the stated plain form, and `rmspec score` feeds the model the
same token ids the training data holds for the same conversation."""

from __future__ import annotations

import json

import pytest

from helpers.data import make_spec, read_jsonl, write_jsonl
from helpers.scoring_models import build_tiny_bert, build_tiny_llama_chat
from rmspec.data.layout import PAIR, TEMPLATE, Layout, plain_conversation
from rmspec.data.tool_store import pack, restore
from rmspec.messages import Rules, conversation

# Qwen's tool format, inline: calls as <tool_call> JSON (text arguments as given, as Qwen3's template
# writes them), results as <tool_response> in a user turn.
TOOLS_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
    '{% for c in m.tool_calls or [] %}\n<tool_call>\n{"name": "{{ c.function.name }}", "arguments": '
    "{% if c.function.arguments is string %}{{ c.function.arguments }}{% else %}{{ c.function.arguments | tojson }}"
    "{% endif %}}\n</tool_call>{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def tool_row(i, name, arguments, result):
    prompt = [
        {"role": "user", "content": f"question {i} about the weather"},
        {"role": "assistant", "content": None, "tool_calls": [call(name, arguments)]},
        {"role": "tool", "name": name, "tool_call_id": f"c{i}", "content": result},
    ]
    return {
        "id": f"r{i}",
        "chosen": [*prompt, {"role": "assistant", "content": f"it is {result} today"}],
        "rejected": [*prompt, {"role": "assistant", "content": "no idea"}],
    }


ROWS = [
    tool_row(0, "get_weather", {"city": "Paris", "days": 2}, "sunny 21C"),
    tool_row(1, "get_weather", {"days": 2.5, "unit": "celsius"}, "rain 12C"),  # other keys, a float
    tool_row(2, "search", '{"query": "rivers"}', "the Seine"),  # arguments as JSON text
    {
        "id": "r3",
        "chosen": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}],
        "rejected": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "go away"}],
    },
]
BAD = tool_row(4, "get_weather", {}, "x")
BAD["chosen"][1]["tool_calls"] = BAD["rejected"][1]["tool_calls"] = [
    {"type": "function", "function": {"arguments": {}}}
]


def prepare_rows(tmp_path, model_dir, rows):
    from rmspec.data import prepare
    from rmspec.data.tokenizer import load_tokenizer

    write_jsonl(tmp_path / "d.jsonl", rows)
    loaded = make_spec(
        tmp_path,
        {"source": {"kind": "files", "paths": ["d.jsonl"]}, "mapping": {"preset": "conversational"}},
        model=str(model_dir),
    )
    tokenizer = load_tokenizer(loaded)
    prepared = prepare(loaded, tokenizer, cache_dir=tmp_path / "cache", rejects_path=tmp_path / "rejects.jsonl")
    return prepared, tokenizer, read_jsonl(tmp_path / "rejects.jsonl")


def scored_ids(tmp_path, model_dir, rows, monkeypatch):
    """The token ids `rmspec score` hands the model for each row (chosen, rejected), and its rejects."""
    from rmspec.inference.engine import RewardEngine
    from rmspec.score.runner import score_file

    seen = []
    real = RewardEngine.grouped_outputs
    monkeypatch.setattr(
        RewardEngine,
        "grouped_outputs",
        lambda self, groups, *a, **k: seen.extend([[e.ids for e in g] for g in groups]) or real(self, groups, *a, **k),
    )
    write_jsonl(tmp_path / "score_in.jsonl", rows)
    score_file(RewardEngine.load(model_dir), tmp_path / "score_in.jsonl", tmp_path / "scored.jsonl", target="t")
    rejects = tmp_path / "scored.rejects.jsonl"
    return seen, read_jsonl(rejects) if rejects.exists() else []


def test_tool_parts_survive_arrow_storage_as_written():
    import datasets

    from rmspec.data.records import features
    from rmspec.spec.row_kinds import PAIRS

    recs = []
    for i, row in enumerate(ROWS[:3]):
        msgs = conversation(row["chosen"][:-1], "chosen", Rules(tools=True))
        recs.append({"id": f"r{i}", "prompt_messages": msgs, "want": json.loads(json.dumps(msgs))})
    # as they are, the tool parts do not fit the {role, content} message type
    with pytest.raises((TypeError, ValueError)):
        datasets.Dataset.from_list(
            [{"m": r["want"]} for r in recs], features=datasets.Features({"m": features(PAIRS)["prompt_messages"]})
        )
    stored = [{"prompt_messages": r["prompt_messages"], "tools": pack(r)} for r in recs]
    ds = datasets.Dataset.from_list(
        stored, features=datasets.Features({k: features(PAIRS)[k] for k in ("prompt_messages", "tools")})
    )
    back = [restore(r["prompt_messages"], r["tools"], "prompt_messages") for r in ds.to_list()]
    assert back == [r["want"] for r in recs]
    args = [m["tool_calls"][0]["function"]["arguments"] for m in (b[1] for b in back)]
    assert args == [{"city": "Paris", "days": 2}, {"days": 2.5, "unit": "celsius"}, '{"query": "rivers"}']
    assert isinstance(args[0]["days"], int) and list(args[1]) == ["days", "unit"]  # no null keys, no 2.0, order kept
    assert back[0][2] == {"role": "tool", "content": "sunny 21C", "name": "get_weather", "tool_call_id": "c0"}


def test_plain_form_writes_every_tool_part():
    msgs = conversation(ROWS[0]["chosen"][:-1], "chosen", Rules(tools=True))
    assert plain_conversation(msgs) == (
        "User: question 0 about the weather\n\n"
        'Assistant: calls get_weather({"city": "Paris", "days": 2})\n\n'
        "Tool (get_weather): sunny 21C"
    )
    said = {**msgs[1], "content": "let me look", "tool_calls": [call("search", '{"q": 1}'), call("f", {})]}
    assert plain_conversation([said]) == 'Assistant: let me look\ncalls search({"q": 1})\ncalls f({})'


def test_encoder_training_ids_equal_scoring_ids_and_bad_calls_are_located(tmp_path, monkeypatch):
    model = build_tiny_bert(tmp_path / "bert")
    prepared, tokenizer, rejects = prepare_rows(tmp_path, model, [*ROWS, BAD])
    assert Layout(tokenizer).kind == PAIR
    assert [(r["id"], r["reason"]) for r in rejects] == [("r4", "bad_tool_calls")]
    assert rejects[0]["detail"].startswith("chosen.1.tool_calls.0: expected")
    assert prepared.report.rejected == {"bad_tool_calls": 1}
    train = {r["id"]: r for r in prepared.train}
    assert sorted(train) == ["r0", "r1", "r2", "r3"]
    text = tokenizer.decode(train["r0"]["chosen_input_ids"])
    # the plain form, as the MiniLM tokenizer (lower case, split punctuation) writes it back
    assert 'assistant : calls get _ weather ( { " city " : " paris ", " days " : 2 } )' in text
    assert "tool ( get _ weather ) : sunny 21c" in text

    seen, score_rejects = scored_ids(tmp_path, model, [*ROWS, BAD], monkeypatch)
    assert [r["row"] for r in score_rejects] == [4] and "tool_calls.0" in score_rejects[0]["reason"]
    assert seen == [[train[f"r{i}"]["chosen_input_ids"], train[f"r{i}"]["rejected_input_ids"]] for i in range(4)]


def test_decoder_template_that_renders_tools_gives_scoring_the_training_ids(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    model = build_tiny_llama_chat(tmp_path / "llama")
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = TOOLS_TEMPLATE
    tok.save_pretrained(model)
    prepared, tokenizer, rejects = prepare_rows(tmp_path, model, ROWS)
    assert Layout(tokenizer).kind == TEMPLATE and rejects == []
    train = {r["id"]: r for r in prepared.train}
    text = tokenizer.decode(train["r1"]["chosen_input_ids"])
    # the stored arguments came back as written: no key Arrow added, 2.5 not widened, order kept
    assert '" arguments " : { " days " : 2. 5, " unit " : " celsius " }' in text, text
    assert "null" not in text and "< tool _ response >" in text

    seen, score_rejects = scored_ids(tmp_path, model, ROWS, monkeypatch)
    assert score_rejects == []
    assert seen == [[train[f"r{i}"]["chosen_input_ids"], train[f"r{i}"]["rejected_input_ids"]] for i in range(4)]


def test_openai_text_arguments_render_as_an_object_as_vllm_renders_them(tmp_path, monkeypatch):
    """Qwen2.5's template writes `arguments | tojson` whatever they are: JSON text (the OpenAI form)
    would print as an escaped string. Like vLLM (chat_utils._postprocess_messages), rmspec hands the
    template the object, so the row trains (no template_drops_tools) and scores on the same ids."""
    from transformers import AutoTokenizer

    model = build_tiny_llama_chat(tmp_path / "llama")
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = TOOLS_TEMPLATE.replace(
        "{% if c.function.arguments is string %}{{ c.function.arguments }}{% else %}"
        "{{ c.function.arguments | tojson }}{% endif %}",
        "{{ c.function.arguments | tojson }}",
    )
    assert "is string" not in tok.chat_template
    tok.save_pretrained(model)
    rows = [tool_row(0, "search", '{"query": "rivers", "limit": 3}', "the Seine")]
    prepared, tokenizer, rejects = prepare_rows(tmp_path, model, rows)
    assert rejects == []
    rendered = tokenizer.apply_chat_template(
        [
            *rows[0]["chosen"][:1],
            {**rows[0]["chosen"][1], "tool_calls": [call("search", {"query": "rivers", "limit": 3})]},
        ],
        tokenize=False,
    )
    assert '"arguments": {"query": "rivers", "limit": 3}' in rendered  # what the template makes of the object
    text = tokenizer.decode(prepared.train[0]["chosen_input_ids"])
    assert "\\" not in text and '" limit " : 3' in text, text
    seen, score_rejects = scored_ids(tmp_path, model, rows, monkeypatch)
    assert score_rejects == [] and seen == [
        [prepared.train[0]["chosen_input_ids"], prepared.train[0]["rejected_input_ids"]]
    ]


def test_a_template_that_drops_tools_is_a_reject_in_data_score_and_serve(tmp_path, monkeypatch):
    from rmspec.serve.chat import check_layout
    from rmspec.serve.request_io import ApiError

    model = build_tiny_llama_chat(tmp_path / "llama")  # "<role> content": no tool calls in it
    prepared, tokenizer, rejects = prepare_rows(tmp_path, model, ROWS)
    assert sorted(r["id"] for r in prepared.train) == ["r3"]
    assert [(r["id"], r["reason"]) for r in rejects] == [(f"r{i}", "template_drops_tools") for i in range(3)]
    assert rejects[0]["detail"].startswith("prompt_messages.1.tool_calls.0: the chat template of ")
    assert str(model) in rejects[0]["detail"] and "'get_weather'" in rejects[0]["detail"]
    assert prepared.report.rejected == {"template_drops_tools": 3}

    seen, score_rejects = scored_ids(tmp_path, model, ROWS, monkeypatch)
    assert [r["row"] for r in score_rejects] == [0, 1, 2] and len(seen) == 1
    assert "'chosen.1.tool_calls.0'" in score_rejects[0]["reason"]

    prompt = conversation(ROWS[0]["chosen"][:-1], "messages", Rules(tools=True))
    with pytest.raises(ApiError) as err:
        check_layout(Layout(tokenizer), prompt)
    assert (err.value.status, err.value.param) == (422, "messages.1.tool_calls.0")
    assert "renders this conversation without" in err.value.message


def test_arguments_arrow_would_unify_are_read_as_written(tmp_path):
    import datasets

    from rmspec.data.tool_store import arrow_typed_arguments

    # Every message with the same keys and arguments with the same keys in every row: Arrow types them
    # as one struct, and 2 next to 2.5 reads back as 2.0 (where keys differ, datasets 5 keeps the
    # values as JSON, read as written).
    def same_keys(i, arguments):
        prompt = [
            {"role": "user", "content": f"question {i}", "tool_calls": None},
            {"role": "assistant", "content": "", "tool_calls": [call("get_weather", arguments)]},
            {"role": "tool", "content": f"sunny {i}", "tool_calls": None},
        ]
        return {
            "id": f"r{i}",
            "chosen": [*prompt, {"role": "assistant", "content": "sunny", "tool_calls": None}],
            "rejected": [*prompt, {"role": "assistant", "content": "no idea", "tool_calls": None}],
        }

    rows = [same_keys(0, {"city": "Paris", "days": 2}), same_keys(1, {"city": "Rome", "days": 2.5})]
    write_jsonl(tmp_path / "raw.jsonl", rows)
    as_arrow = datasets.load_dataset("json", data_files=str(tmp_path / "raw.jsonl"), split="train")
    arrow_args = as_arrow[0]["chosen"][1]["tool_calls"][0]["function"]["arguments"]
    assert arrow_args == {"city": "Paris", "days": 2.0} and isinstance(arrow_args["days"], float)
    assert arrow_typed_arguments(as_arrow.features)

    prepared, tokenizer, rejects = prepare_rows(tmp_path, build_tiny_bert(tmp_path / "bert"), rows)
    assert rejects == []
    text = tokenizer.decode(next(r for r in prepared.train if r["id"] == "r0")["chosen_input_ids"])
    assert 'get _ weather ( { " city " : " paris ", " days " : 2 } )' in text, text


# Qwen2.5 groups consecutive tool results into one user turn: a prefix that ends inside the group
# renders differently from the whole, so the layout renders such a group as one piece.
GROUPING_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m.role == 'tool' %}"
    "{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|> user{% endif %}"
    " <tool_response> {{ m.content }} </tool_response>"
    "{% if loop.last or messages[loop.index0 + 1].role != 'tool' %} <|im_end|> {% endif %}"
    "{% else %}<|im_start|> {{ m.role }} {{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %} <tool_call> {{ c.function.name }} {{ c.function.arguments | tojson }}"
    " </tool_call>{% endfor %} <|im_end|> {% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


def test_generative_rows_learn_the_calls_and_not_the_results(tmp_path):
    from helpers.data import chat_tokenizer
    from rmspec.data import prepare

    conv = [
        {"role": "user", "content": "weather in paris and rome"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("weather", {"c": "paris"}), call("weather", {"c": "rome"})],
        },
        {"role": "tool", "name": "weather", "content": "sunny"},
        {"role": "tool", "name": "weather", "content": "rain"},
        {"role": "assistant", "content": "paris sunny rome rain"},
    ]
    words = ["weather in paris and rome sunny rain tool_call tool_response c"]
    tok = chat_tokenizer(words + ['{ " : } / < >'])
    tok.chat_template = GROUPING_TEMPLATE
    write_jsonl(tmp_path / "d.jsonl", [{"messages": conv}])
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "messages"},
            "filters": [{"kind": "drop_empty"}],
        },
        approach={"kind": "generative"},
        model="Qwen/Qwen2.5-0.5B-Instruct",
    )
    prepared = prepare(loaded, tok, cache_dir=tmp_path / "cache", rejects_path=tmp_path / "rejects.jsonl")
    assert prepared.report.rejected == {}  # the calls-only turn is not "empty"
    [row] = prepared.train
    whole = tok.apply_chat_template(conversation(conv, "messages", Rules(tools=True)), tokenize=False)
    assert row["input_ids"] == tok(whole, add_special_tokens=False)["input_ids"]
    learned = tok.decode([t for t, lab in zip(row["input_ids"], row["labels"]) if lab != -100])
    assert learned.count("tool_call") == 4 and "rome" in learned and "sunny rain" not in learned
    assert "paris sunny rome rain" in learned

    layout = Layout(tok, "plain")
    plain = layout.turns(conversation(conv, "messages", Rules(tools=True)))
    said = [p for p, learn in zip(plain.pieces, plain.learn) if learn]
    calls = ' calls weather({"c": "paris"})\ncalls weather({"c": "rome"})'
    assert said[0] == layout.encode([calls])[0] + layout.plain_tail
    assert plain.pieces[4:6] == layout.encode(["\n\nTool (weather): sunny", "\n\nTool (weather): rain"])
    assert plain.learn == [False, False, False, True, False, False, False, True]
