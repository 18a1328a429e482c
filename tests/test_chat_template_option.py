"""model.chat_template: a Jinja file or an inline template replaces the tokenizer's own in the data
commands and in training, is saved with RUN/model's tokenizer (plain transformers loads it) and is
what `rmspec score` renders with; a missing file, a template that does not compile and a plain layout
are refused with a clear message."""

from __future__ import annotations

import json

import pytest

from helpers.data import make_spec, write_jsonl
from helpers.runs import rmspec
from helpers.scoring_models import CHAT_TEMPLATE, build_tiny_llama_chat
from rmspec.data.chat_template import read_chat_template, use_chat_template
from rmspec.errors import DataError

TEMPLATE = (
    "{% for m in messages %}[{{ m['role'] | upper }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[ASSISTANT] {% endif %}"
)


def rows(n: int = 24):
    return [
        {
            "id": f"r{i}",
            "prompt": [{"role": "user", "content": f"question {i} about rivers"}],
            "chosen": [{"role": "assistant", "content": f"good answer {i}"}],
            "rejected": [{"role": "assistant", "content": f"bad {i}"}],
        }
        for i in range(n)
    ]


def test_inline_and_file_templates_are_read_and_bad_ones_refused(tmp_path):
    (tmp_path / "t.jinja").write_text(TEMPLATE)
    assert read_chat_template("t.jinja", tmp_path) == TEMPLATE
    assert read_chat_template(TEMPLATE, tmp_path) == TEMPLATE
    with pytest.raises(DataError, match="no file .*missing.jinja"):
        read_chat_template("missing.jinja", tmp_path)
    model = type("M", (), {"chat_template": "{% for m in messages %}{{ m['content'] }"})()
    with pytest.raises(DataError, match="does not compile"):
        use_chat_template(object(), model, tmp_path)


def test_the_data_commands_lay_rows_out_with_the_spec_template(tmp_path):
    model = build_tiny_llama_chat(tmp_path / "model")
    write_jsonl(tmp_path / "d.jsonl", rows(4))
    (tmp_path / "t.jinja").write_text(TEMPLATE)
    from rmspec.data import prepare
    from rmspec.data.tokenizer import load_tokenizer

    for value, marker in (("t.jinja", "[ assistant ] good answer 0"), (None, "< assistant > good answer 0")):
        loaded = make_spec(
            tmp_path,
            {"source": {"kind": "files", "paths": ["d.jsonl"]}, "mapping": {"preset": "pairs"}},
            model=str(model),
        )
        loaded.spec.model.chat_template = value
        tokenizer = load_tokenizer(loaded)
        assert tokenizer.chat_template == (TEMPLATE if value else CHAT_TEMPLATE)
        prepared = prepare(loaded, tokenizer, cache_dir=tmp_path / "cache", rejects_path=tmp_path / "rejects.jsonl")
        text = tokenizer.decode(next(r for r in prepared.train if r["id"] == "r0")["chosen_input_ids"])
        assert marker in text, text


def test_validate_refuses_a_template_the_plain_layout_would_ignore(tmp_path):
    model = build_tiny_llama_chat(tmp_path / "model")
    write_jsonl(tmp_path / "d.jsonl", rows(4))
    spec = tmp_path / "s.yaml"
    spec.write_text(
        json.dumps(
            {
                "version": 1,
                "name": "t",
                "model": {"name_or_path": str(model), "chat_template": TEMPLATE},
                "data": {
                    "source": {"kind": "files", "paths": ["d.jsonl"]},
                    "mapping": {"preset": "pairs", "chat_template": "plain"},
                },
                "approach": {"kind": "bradley_terry"},
                "hardware": {"device": "cpu"},
            }
        )
    )
    done = rmspec("validate", str(spec), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "model.chat_template" in done.stdout + done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_trained_model_carries_the_template_and_score_renders_with_it(tmp_path):
    from transformers import AutoTokenizer

    model = build_tiny_llama_chat(tmp_path / "model")
    write_jsonl(tmp_path / "d.jsonl", rows())
    (tmp_path / "t.jinja").write_text(TEMPLATE)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        json.dumps(
            {
                "version": 1,
                "name": "tpl",
                "model": {"name_or_path": str(model), "chat_template": "t.jinja"},
                "data": {
                    "source": {"kind": "files", "paths": ["d.jsonl"]},
                    "mapping": {"preset": "pairs"},
                    "split": {"validation_fraction": 0.25, "seed": 0},
                },
                "approach": {"kind": "bradley_terry"},
                "training": {"max_steps": 2, "global_batch_size": 4, "max_length": 64, "learning_rate": 1e-3},
                "hardware": {"device": "cpu"},
                "eval": {"validation": True, "benchmarks": []},
                "output": {"dir": str(tmp_path / "runs" / "tpl"), "report": []},
            }
        )
    )
    done = rmspec("run", str(spec), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    saved = tmp_path / "runs" / "tpl" / "model"
    assert AutoTokenizer.from_pretrained(saved).chat_template == TEMPLATE  # plain transformers reads it

    conversations = [
        {"id": r["id"], "chosen": r["prompt"] + r["chosen"], "rejected": r["prompt"] + r["rejected"]} for r in rows()
    ]
    write_jsonl(tmp_path / "score.jsonl", conversations)

    def score() -> list[float]:
        out = tmp_path / "scored.jsonl"
        result = rmspec(
            "score", str(saved), str(tmp_path / "score.jsonl"), "--out", str(out), "--overwrite", "--json", cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr[-2000:]
        return [json.loads(line)["reward_chosen"] for line in out.read_text().splitlines()]

    with_template = score()
    assert len(with_template) == 24
    tokenizer = AutoTokenizer.from_pretrained(saved)
    tokenizer.chat_template = CHAT_TEMPLATE  # the base model's own template, to show score reads the saved one
    tokenizer.save_pretrained(saved)
    assert score() != with_template
