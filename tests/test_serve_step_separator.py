"""`rmspec serve` takes `--step-separator` as `score` and `eval` do: a process reward model saved
without its separator, whose tokenizer drops "\\n" (TRL's default), could not be served at all (the
load stopped with a hint naming the flag). With it the server starts, says which separator its
clients must put after every step, and /pooling's token_classify probabilities at those separators
are the ones plain transformers gives on TRL's layout."""

from __future__ import annotations

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")
need("fastapi")

from helpers.serve_process import ServeProcess  # noqa: E402

SEP = " w79"


@pytest.fixture(scope="module")
def trl_prm(tmp_path_factory):
    from helpers.scoring_models import build_trl_style_prm

    return build_trl_style_prm(tmp_path_factory.mktemp("trl_prm_serve"), seed=5)


def trl_layout(folder, prompt: str, steps: list[str]) -> tuple[list[int], list[int]]:
    """TRL PRMTrainer's ids ([bos] + prompt + (step + separator) per step) and each separator's end."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    enc = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    ids = ([tok.bos_token_id] if tok.bos_token_id is not None else []) + enc(prompt)
    ends = []
    for s in steps:
        ids += enc(s) + enc(SEP)
        ends.append(len(ids) - 1)
    return ids, ends


def test_serve_without_flag_names_the_flag_that_exists(trl_prm, cli):
    result = cli("serve", trl_prm, "--port", "1")
    assert result.code == 2, result.out + result.err
    assert "--step-separator" in result.err
    assert "--step-separator" in cli("serve", "--help").out


def test_serve_step_separator_refused_for_a_reward_model(tmp_path, cli):
    from helpers.models import build_model

    folder = build_model("llama", tmp_path / "rm")
    result = cli("serve", folder, "--port", "1", "--step-separator", SEP)
    assert result.code == 2, result.out + result.err
    assert "process reward models" in result.err


def test_serve_with_step_separator(trl_prm):
    ids, ends = trl_layout(trl_prm, "w1 w2", ["w3 w4", "w5", "w6 w7"])
    model = transformers.AutoModelForTokenClassification.from_pretrained(trl_prm).eval()
    with torch.no_grad():
        expected = model(input_ids=torch.tensor([ids])).logits.softmax(-1)[0, :, 1].tolist()
    server = ServeProcess(trl_prm, "--step-separator", SEP)
    try:
        assert f"step separator {SEP!r}" in server.log()
        status, body, _ = server.post("/pooling", {"input": [ids], "task": "token_classify"})
        assert status == 200, body
        rows = body["data"][0]["data"]
        assert len(rows) == len(ids)
        assert [rows[e][1] for e in ends] == pytest.approx([expected[e] for e in ends], abs=1e-5)
    finally:
        server.stop()
