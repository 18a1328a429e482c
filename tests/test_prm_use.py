"""Using a process reward model: `rmspec score` writes per-step scores and the predicted first error,
`rmspec serve` answers vLLM's /pooling with "task": "token_classify" (per-token probabilities),
both checked against plain transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

SEP = " w79"


@pytest.fixture(scope="module")
def prm_dir(tmp_path_factory) -> Path:
    from helpers.models import build_tokenizer, tiny_llama_config

    folder = tmp_path_factory.mktemp("prm_use")
    tok = build_tokenizer(folder, unk=True)
    config = tiny_llama_config(vocab_size=len(tok), num_labels=2, pad_token_id=0)
    torch.manual_seed(1)
    model = transformers.AutoModelForTokenClassification.from_config(config)
    with torch.no_grad():  # scores spread around 0.5, so predictions differ between steps
        model.score.weight.normal_(0.0, 2.0)
    model.config.update({"rmspec": {"step_separator": SEP, "threshold": 0.5, "chat_template": "plain"}})
    model.save_pretrained(folder)
    return folder


def reference_step_probs(folder: Path, prompt: str, steps: list[str]) -> list[float]:
    """Plain transformers: the plain layout's ids, softmax(logits)[..., 1] at each separator token."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForTokenClassification.from_pretrained(folder).eval()
    enc = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    ids = enc(f"User: {prompt}\n\nAssistant:") + enc("\n")
    ends = []
    for s in steps:
        ids += enc(s) + enc(SEP)
        ends.append(len(ids) - 1)
    with torch.no_grad():
        probs = model(input_ids=torch.tensor([ids])).logits.softmax(-1)[0, :, 1]
    return [probs[e].item() for e in ends]


ROWS = [
    {"id": "gsm8k-0", "problem": "w1 w2", "steps": ["w3 w4", "w5", "w6 w7"]},
    {"id": "gsm8k-1", "problem": "w8", "steps": ["w9"]},
    {"id": "gsm8k-2", "problem": "w8", "steps": []},
]


def test_score_writes_step_scores_and_first_error(prm_dir, tmp_path, cli):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "scored.jsonl"
    result = cli("score", prm_dir, src, "--out", out, "--json")
    assert result.code == 0, result.out + result.err
    scored = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in scored] == ["gsm8k-0", "gsm8k-1"]
    for row in scored:
        ref = reference_step_probs(prm_dir, row["problem"], row["steps"])
        assert row["step_scores"] == pytest.approx(ref, abs=1e-5)
        assert row["first_error"] == next((i for i, p in enumerate(ref) if p < 0.5), -1)
        assert row["steps_scored"] == len(row["steps"]) and row["truncated"] is False
    from rmspec.score.output import rejects_path

    rejects = [json.loads(x) for x in rejects_path(out).read_text().splitlines()]
    assert [r["row"] for r in rejects] == [2] and "non-empty list" in rejects[0]["reason"]


@pytest.mark.slow
def test_serve_pooling_token_classify(prm_dir):
    need("fastapi")
    from helpers.serve_process import ServeProcess

    tok = transformers.AutoTokenizer.from_pretrained(prm_dir)
    model = transformers.AutoModelForTokenClassification.from_pretrained(prm_dir).eval()
    ids = [
        tok("w1 w2 w3 w79 w4 w79", add_special_tokens=False)["input_ids"],
        tok("w5 w79", add_special_tokens=False)["input_ids"],
    ]
    server = ServeProcess(prm_dir)
    try:
        status, body, _ = server.post(
            "/pooling", {"model": str(prm_dir), "input": ids, "task": "token_classify"}
        )  # vLLM: an unknown model is a 404
        assert status == 200, body
        for item, seq in zip(body["data"], ids):
            with torch.no_grad():
                ref = model(input_ids=torch.tensor([seq])).logits.softmax(-1)[0].tolist()
            assert len(item["data"]) == len(seq)
            for got, want in zip(item["data"], ref):
                assert got == pytest.approx(want, abs=1e-5)
        # `activation` is deprecated and ignored by current vLLM (issue 18): still probabilities.
        status, body, _ = server.post("/pooling", {"input": ids[0], "task": "token_classify", "activation": False})
        with torch.no_grad():
            probs = model(input_ids=torch.tensor([ids[0]])).logits.softmax(-1)[0].tolist()
        assert status == 200 and body["data"][0]["data"][0] == pytest.approx(probs[0], abs=1e-5)
        status, body, _ = server.post("/pooling", {"input": ids[0], "task": "classify"})
        assert status == 400 and "token_classify" in json.dumps(body)  # vLLM answers bad requests 400
        status, body, _ = server.post("/classify", {"input": ids[0]})
        assert status == 400 and "token_classify" in json.dumps(body)
    finally:
        server.stop()
