"""What the serve tests share: a client package (or a skip), and a tiny BERT whose scores spread by
whole units."""

from __future__ import annotations

from pathlib import Path

from helpers.ci import need
from helpers.scoring_models import build_tiny_bert

torch = need("torch")  # need: also what the serve tests import from here for their client packages
transformers = need("transformers")


MEAN, STD = 0.25, 1.5


def build_spread_bert(directory: Path, mean: float | None = MEAN, std: float | None = STD) -> Path:
    """The tiny BERT with a head whose outputs differ by whole units between texts (a parity test on
    near-equal scores would prove nothing), and rmspec's normalization stats in config.json."""
    build_tiny_bert(directory)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory)
    torch.manual_seed(3)
    with torch.no_grad():
        model.bert.pooler.dense.weight.normal_(0.0, 0.5)
        model.classifier.weight.normal_(0.0, 4.0)
    if mean is not None:
        model.config.reward_mean, model.config.reward_std = mean, std
    model.save_pretrained(directory)
    return directory


def served_rewards(target: Path, pairs: list[tuple[str, str]]) -> list[float]:
    """What `rmspec serve TARGET` (its app, built as the command builds it) answers vLLM's /pooling with
    for each (prompt, response) sent as a conversation: the raw reward."""
    from fastapi.testclient import TestClient

    from rmspec.inference.engine import load_scorer
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    out = []
    with TestClient(create_app(Service(load_scorer(target), model_name="m", normalize=False))) as client:
        for prompt, response in pairs:
            messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
            answer = client.post("/pooling", json={"messages": messages, "use_activation": False})
            assert answer.status_code == 200, answer.text
            out.append(answer.json()["data"][0]["data"][0])
    return out
