"""A real `rmspec serve` subprocess called as the real clients call it, and parity with
`rmspec score` and `rmspec eval` for the same texts.

- OpenRLHF: aiohttp, its exact payload, 180 s total timeout, 5 tries 1 s apart (openrlhf/utils/agent.py);
- verl / vLLM: the `openai` package's `client.post("/classify", cast_to=httpx2.Response, body=...)`;
- plain HTTP for /pooling.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
from pathlib import Path

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers.scoring_models import PAIRS, build_tiny_bert, build_tiny_llama_chat  # noqa: E402
from helpers.serve_process import ServeProcess  # noqa: E402
from helpers.serving import MEAN, STD, build_spread_bert  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    need("fastapi")
    return build_spread_bert(tmp_path_factory.mktemp("spread_bert"))


@pytest.fixture(scope="module")
def server(model_dir):
    proc = ServeProcess(model_dir, "--max-wait-ms", "50", "--served-model-name", "rm")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def engine(model_dir):
    from rmspec.inference.engine import RewardEngine

    return RewardEngine.load(model_dir)


def fixture_pairs() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "pairs.jsonl").read_text().splitlines()]


def openrlhf_query(engine, prompt, response) -> str:
    """What OpenRLHF sends: the decoded sequence with its special tokens kept."""
    return engine.tokenizer.decode(engine.encode([(prompt, response)])[0].ids, skip_special_tokens=False)


async def openrlhf_post(url: str, queries, prompts, labels):
    """openrlhf/utils/agent.py `_fetch_rewards_via_http` for one server: same payload, timeout and retries."""
    aiohttp = need("aiohttp")
    timeout = aiohttp.ClientTimeout(total=180)
    payload = {"query": queries, "prompts": prompts, "labels": labels}
    for _ in range(5):
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session, session.post(url, json=payload) as response:
                response.raise_for_status()
                return await response.json()
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(1)
    raise RuntimeError("Request error for 5 times")


def test_decoded_queries_encode_as_training_did(tmp_path):
    """OpenRLHF's query (decode with special tokens) re-tokenizes to the training ids, segment ids
    included, for an encoder pair and for a chat template."""
    from rmspec.inference.engine import RewardEngine

    for build in (build_tiny_bert, build_tiny_llama_chat):
        eng = RewardEngine.load(build(tmp_path / build.__name__))
        for prompt, response in PAIRS:
            trained = eng.encode([(prompt, response)])[0]
            again = eng.encode_text(openrlhf_query(eng, prompt, response))
            assert again.ids == trained.ids and again.type_ids == trained.type_ids


def test_openrlhf_server_score_and_eval_agree(server, engine, model_dir, cli, tmp_path):
    rows = fixture_pairs()
    # rmspec eval's per-example scores (the benchmark path)...
    result = cli(
        "eval", model_dir, "--benchmark", f"pairs={FIXTURES / 'pairs.jsonl'}", "--out", tmp_path / "eval", "--json"
    )
    assert result.code == 0, result.err
    evaluated = [
        json.loads(x) for x in Path(json.loads(result.out)["pairs"]["per_example_path"]).read_text().splitlines()
    ]
    # ...rmspec score's...
    result = cli("score", model_dir, FIXTURES / "pairs.jsonl", "--out", tmp_path / "scored.jsonl", "--json")
    assert result.code == 0, result.err
    scored = [json.loads(x) for x in (tmp_path / "scored.jsonl").read_text().splitlines()]
    # ...and the server's, one sample per request, all in flight at once as OpenRLHF's rollout sends them.
    texts = [(r["prompt"], r[side]) for r in rows for side in ("chosen", "rejected")]

    async def all_requests():
        return await asyncio.gather(
            *(openrlhf_post(server.url + "/get_reward", [openrlhf_query(engine, p, t)], [p], [None]) for p, t in texts)
        )

    answers = asyncio.run(all_requests())
    served_raw = [a["extra_logs"]["raw_reward"][0] for a in answers]
    eval_scores = [e[f"score_{side}"] for e in evaluated for side in ("chosen", "rejected")]
    score_scores = [s[f"reward_{side}"] for s in scored for side in ("chosen", "rejected")]
    assert max(eval_scores) - min(eval_scores) > 0.1  # the texts really score differently
    assert served_raw == pytest.approx(eval_scores, abs=1e-5)
    assert score_scores == pytest.approx(eval_scores, abs=1e-5)
    # Normalization is on by default (the config has reward_mean/reward_std); scores == rewards.
    for a, raw in zip(answers, served_raw):
        assert a["rewards"] == a["scores"] == pytest.approx([(raw - MEAN) / STD], abs=1e-6)
        assert a["extra_logs"]["truncated"] == [0.0]
    # The score file keeps the input columns, in order, and adds the normalized rewards.
    assert list(scored[0])[:5] == list(rows[0])
    assert scored[0]["reward_chosen_normalized"] == pytest.approx((scored[0]["reward_chosen"] - MEAN) / STD)
    assert scored[0]["p_chosen"] == pytest.approx(
        1 / (1 + math.exp(-(scored[0]["reward_chosen"] - scored[0]["reward_rejected"])))
    )


def test_openrlhf_batch_and_extra_keys(server, engine):
    status, body, _ = server.post(
        "/get_reward",
        {
            "query": [openrlhf_query(engine, p, r) for p, r in PAIRS[:3]],
            "prompts": ["a", "b", "c"],
            "labels": [None, "x", 1],
            "unknown_key": {"a": 1},
        },
    )
    assert status == 200 and len(body["rewards"]) == 3
    expected = [(o[0] - MEAN) / STD for o in engine.outputs(engine.encode(PAIRS[:3]))]
    assert body["rewards"] == pytest.approx(expected, abs=1e-5)


def test_openai_client_classify_as_verl_calls_it(server, engine):
    openai = need("openai")
    httpx = need("httpx2") if importlib.util.find_spec("httpx2") else need("httpx")
    client = openai.OpenAI(base_url=server.url, api_key="unused")
    prompt, response = PAIRS[0]
    raw = engine.outputs(engine.encode([(prompt, response)]))[0][0]
    # Messages: laid out on the server as training laid them out.
    body = {
        "model": "rm",
        "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}],
        "use_activation": False,
    }
    out = client.post("/classify", cast_to=httpx.Response, body=body).json()
    assert out["object"] == "list" and out["id"].startswith("classify-") and out["model"] == "rm"
    assert out["data"][-1]["probs"][-1] == pytest.approx((raw - MEAN) / STD, abs=1e-5)
    assert out["data"][0]["num_classes"] == 1 and out["data"][0]["label"] == "LABEL_0"  # vLLM's id2label[argmax]
    assert out["usage"]["prompt_tokens"] == len(engine.encode([(prompt, response)])[0].ids)
    # verl's own form: an already formatted `input`; the activation (sigmoid) is on unless switched off.
    text = openrlhf_query(engine, prompt, response)
    out = client.post(
        "/classify", cast_to=httpx.Response, body={"model": "rm", "input": text, "add_special_tokens": False}
    ).json()
    assert out["data"][-1]["probs"][-1] == pytest.approx(1 / (1 + math.exp(-(raw - MEAN) / STD)), abs=1e-5)
    out = client.post(
        "/classify",
        cast_to=httpx.Response,
        body={"model": "rm", "input": text, "use_activation": False, "add_special_tokens": False},
    ).json()
    assert out["data"][-1]["probs"][-1] == pytest.approx((raw - MEAN) / STD, abs=1e-5)
    models = openai.OpenAI(base_url=server.url + "/v1", api_key="unused").models.list()
    assert [m.id for m in models.data] == [str(server_model(server))]


def server_model(server) -> str:
    status, body = server.get("/health")
    return json.loads(body)["model"]


def test_pooling_plain_http(server, engine):
    texts = [openrlhf_query(engine, p, r) for p, r in PAIRS[:2]]
    raw = [o[0] for o in engine.outputs(engine.encode(PAIRS[:2]))]
    status, body, _ = server.post("/pooling", {"input": texts, "add_special_tokens": False, "use_activation": False})
    assert status == 200 and body["object"] == "list" and body["id"].startswith("pool-")
    assert [d["object"] for d in body["data"]] == ["pooling", "pooling"] and [d["index"] for d in body["data"]] == [
        0,
        1,
    ]
    assert [d["data"][0] for d in body["data"]] == pytest.approx([(r - MEAN) / STD for r in raw], abs=1e-5)
    # Token ids are accepted as vLLM accepts them.
    ids = engine.encode(PAIRS[:1])[0].ids
    status, body, _ = server.post("/pooling", {"input": ids, "use_activation": False})
    assert status == 200 and body["data"][0]["data"][0] == pytest.approx((raw[0] - MEAN) / STD, abs=1e-5)


def test_truncation_is_reported_and_cut_as_training_cuts(server, engine):
    prompt, response = "word " * 700, "the end of a long answer"
    trained = engine.encode([(prompt, response)])[0]
    assert trained.truncated and len(trained.ids) == engine.max_length
    raw = engine.outputs([trained])[0][0]
    status, body, _ = server.post(
        "/classify",
        {
            "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}],
            "use_activation": False,
        },
    )
    assert status == 200 and body["data"][0]["truncated"] is True
    assert body["data"][0]["probs"][0] == pytest.approx((raw - MEAN) / STD, abs=1e-5)
    status, body, _ = server.post("/get_reward", {"query": [openrlhf_query(engine, prompt, response)]})
    assert body["extra_logs"]["truncated"] == [0.0]  # the decoded query is already max_length tokens long
    status, body, _ = server.post("/get_reward", {"query": ["[CLS] " + "word " * 700 + "[SEP] end [SEP]"]})
    assert status == 200 and body["extra_logs"]["truncated"] == [1.0]


def test_same_score_whatever_the_batch(server, engine):
    """40 single-sample requests at once (batched together) score as each one alone."""
    texts = [
        openrlhf_query(engine, f"question {i} " + "x " * (i % 7), f"answer {i} " + "y " * (i * 3 % 11))
        for i in range(40)
    ]
    alone = [server.post("/get_reward", {"query": [t]})[1]["extra_logs"]["raw_reward"][0] for t in texts]
    _, before = server.get("/metrics")

    async def together():
        return await asyncio.gather(*(openrlhf_post(server.url + "/get_reward", [t], [""], [None]) for t in texts))

    batched = [a["extra_logs"]["raw_reward"][0] for a in asyncio.run(together())]
    assert batched == pytest.approx(alone, abs=1e-5)
    _, after = server.get("/metrics")
    batches = metric(after, "rmspec_batch_size_items_count") - metric(before, "rmspec_batch_size_items_count")
    assert batches < len(texts)  # requests shared forward passes


def metric(text: bytes, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_health_and_prometheus_metrics(server):
    status, body = server.get("/health")
    health = json.loads(body)
    assert status == 200 and health["status"] == "ok" and health["normalize"] is True and health["kind"] == "reward"
    server.post("/get_reward", {"query": "not a list, still one text"})
    status, text = server.get("/metrics")
    assert status == 200
    assert metric(text, "rmspec_requests_total", route="/get_reward", status="200") >= 1
    assert metric(text, "rmspec_request_latency_seconds_count", route="/get_reward") >= 1
    assert metric(text, "rmspec_items_scored_total") >= 1
    assert "rmspec_queue_depth" in text.decode()


def test_normalization_can_be_switched_off(model_dir, engine, cli, tmp_path):
    proc = ServeProcess(model_dir, "--no-normalize")
    try:
        status, body = proc.get("/health")
        assert json.loads(body)["normalize"] is False
        raw = engine.outputs(engine.encode(PAIRS[:2]))
        status, body, _ = proc.post("/get_reward", {"query": [openrlhf_query(engine, p, r) for p, r in PAIRS[:2]]})
        assert (
            body["rewards"] == pytest.approx([o[0] for o in raw], abs=1e-5) and "raw_reward" not in body["extra_logs"]
        )
    finally:
        proc.stop()
    # Asking for normalization a model cannot give is an error, not a silent raw score.
    plain = build_spread_bert(tmp_path / "no_stats", mean=None)
    result = cli("serve", plain, "--normalize", "--port", "1")
    assert result.code == 2 and "reward_mean" in result.err
