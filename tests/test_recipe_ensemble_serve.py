"""An ensemble model served: the reward is the members' reduction (mean by default, which plain
transformers computes from the saved mean head), `reward_std` comes back in OpenRLHF's extra_logs and
beside vLLM's /pooling and /classify data, and --ensemble-reduce min / mean_minus_std change the
served reward. The ensemble is built by hand on a tiny BERT (no training), so the members' rewards
are computed independently from the backbone's pooled output."""

from __future__ import annotations

import math

import pytest

from helpers.ci import need
from helpers.scoring_models import build_tiny_bert

torch = need("torch")
transformers = need("transformers")
need("httpx")

TEXTS = ["What is 2 + 2? It is four.", "Name a colour. Blue, as the sky on a clear day.", "Hi"]


@pytest.fixture(scope="module")
def ensemble_dir(tmp_path_factory):
    from safetensors.torch import save_file

    folder = build_tiny_bert(tmp_path_factory.mktemp("ens") / "model")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder)
    torch.manual_seed(0)
    weight, bias = torch.randn(4, model.config.hidden_size) * 3, torch.randn(4)
    with torch.no_grad():
        model.classifier.weight.copy_(weight.mean(0, keepdim=True))
        model.classifier.bias.copy_(bias.mean(0, keepdim=True))
    model.save_pretrained(folder)
    save_file({"weight": weight, "bias": bias}, str(folder / "ensemble_heads.safetensors"))
    return folder, weight, bias


def _members(folder, weight, bias, text):
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        enc = tok(text, return_tensors="pt")
        pooled = model.bert(**enc).pooler_output[0]
        plain = float(model(**enc).logits[0, 0])
    return weight @ pooled + bias, plain


def _sent(folder):
    """What clients send: OpenRLHF's decoded query with its special tokens, vLLM's token ids; both
    the exact sequence `tokenizer(text)` gives, which the members are computed on."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    ids = [tok(t)["input_ids"] for t in TEXTS]
    return [tok.decode(x) for x in ids], ids


def _client(folder, how="mean", coef=1.0):
    from fastapi.testclient import TestClient

    from rmspec.inference.engine import load_scorer
    from rmspec.inference.ensemble import set_reduce
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    engine = load_scorer(folder)
    set_reduce(engine.model, how, coef)  # what `rmspec serve --ensemble-reduce` does
    return TestClient(create_app(Service(engine, model_name="m", normalize=False, segments="plain")))


def test_openrlhf_and_vllm_answer_the_mean_and_reward_std(ensemble_dir):
    folder, weight, bias = ensemble_dir
    queries, ids = _sent(folder)
    with _client(folder) as client:
        got = client.post("/get_reward", json={"query": queries}).json()
        pooled = client.post("/pooling", json={"input": ids, "task": "classify", "use_activation": False}).json()
        classify = client.post("/classify", json={"input": ids[:1]}).json()
    for i, text in enumerate(TEXTS):
        members, plain = _members(folder, weight, bias, text)
        assert abs(got["rewards"][i] - plain) < 1e-4  # the mean head == the members' mean
        assert abs(got["rewards"][i] - float(members.mean())) < 1e-4
        assert abs(got["extra_logs"]["reward_std"][i] - float(members.std(correction=0))) < 1e-4
        item = pooled["data"][i]
        assert len(item["data"]) == 1 and abs(item["data"][0] - plain) < 1e-4
        assert abs(item["reward_std"] - float(members.std(correction=0))) < 1e-4
    # /classify: one class (the reward through the sigmoid), not the members
    assert classify["data"][0]["num_classes"] == 1 and "reward_std" in classify["data"][0]


@pytest.mark.parametrize("how, coef", [("min", 1.0), ("mean_minus_std", 0.5)])
def test_ensemble_reduce_changes_the_served_reward(ensemble_dir, how, coef):
    folder, weight, bias = ensemble_dir
    with _client(folder, how, coef) as client:
        got = client.post("/get_reward", json={"query": _sent(folder)[0]}).json()
    for i, text in enumerate(TEXTS):
        members, _ = _members(folder, weight, bias, text)
        want = float(members.min()) if how == "min" else float(members.mean() - coef * members.std(correction=0))
        assert abs(got["rewards"][i] - want) < 1e-4
        assert math.isfinite(got["extra_logs"]["reward_std"][i])


def test_a_stale_members_file_is_refused(tmp_path):
    from safetensors.torch import save_file

    from rmspec.errors import RmspecError
    from rmspec.inference.engine import load_scorer

    folder = build_tiny_bert(tmp_path / "model")
    save_file({"weight": torch.ones(3, 32)}, str(folder / "ensemble_heads.safetensors"))
    with pytest.raises(RmspecError, match="members"):
        load_scorer(folder)


def test_ensemble_coef_without_mean_minus_std_is_refused(cli, tmp_path):
    """--ensemble-coef weighs only mean_minus_std's std: with another reduction it would do nothing."""
    result = cli("serve", str(tmp_path), "--ensemble-reduce", "min", "--ensemble-coef", "2")
    assert result.code == 2 and "--ensemble-reduce mean_minus_std" in result.err
