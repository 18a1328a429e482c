"""`rmspec serve` as RL clients meet it (issue 18): where the reward is read in a served text, work
dropped for a client that disconnected, the metrics after every kind of request, prompt SIGTERM,
encoder segment ids, limits that fit OpenRLHF <= 0.9 batches, vLLM's /v1/models fields."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from helpers.ci import need

torch = need("torch")
transformers = need("transformers")

from helpers.serve_models import build_llama3, build_qwen2_chatml, metric  # noqa: E402
from helpers.serve_process import ServeProcess  # noqa: E402
from helpers.serving import build_spread_bert  # noqa: E402

pytestmark = pytest.mark.slow
CONV = [{"role": "user", "content": "What colour is the sky?"}]
REPLY = "Blue, on a clear day."
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ m['content'] }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def _engine(directory):
    from rmspec.inference.engine import RewardEngine

    return RewardEngine.load(directory)


def _variants(tok, trained_ids: list[int]) -> dict[str, list[int]]:
    """The same conversation as clients send it: as trained, without the template's trailing
    newline, with a final EOS, with padding, without / with a doubled BOS."""
    eos, pad, bos = tok.eos_token_id, tok.pad_token_id, tok.bos_token_id
    out = {"as trained": trained_ids, "final EOS": trained_ids + [eos], "padded": trained_ids + [pad] * 3}
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    if trained_ids[-len(newline) :] == newline:
        out["no trailing newline"] = trained_ids[: -len(newline)]
        out["no newline, EOS"] = trained_ids[: -len(newline)] + [eos]
        out["no newline, padded"] = trained_ids[: -len(newline)] + [pad, pad]
    if bos is not None and trained_ids[:1] == [bos]:
        out["no BOS"] = trained_ids[1:]
        out["doubled BOS"] = [bos] + trained_ids
    return out


def _plain_reward(directory, ids: list[int]) -> float:
    """The reward plain transformers gives the token ids (one unpadded sequence): independent of the engine."""
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory).eval()
    with torch.no_grad():
        return float(model(input_ids=torch.tensor([ids])).logits[0, 0])


@pytest.mark.parametrize("build", [build_qwen2_chatml, build_llama3, "gemma"])
def test_a_complete_conversation_is_read_where_training_reads_it(build, tmp_path):
    """ChatML (trailing newline after <|im_end|>), Llama-3 (BOS in the template and added by the
    tokenizer) and a Gemma-style template (BOS and a trailing newline): every way a client ends the
    conversation scores as the training layout does; a text that is not a complete turn is left as sent."""
    if build == "gemma":
        build_qwen2_chatml(tmp_path / "m")
        tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
        tok.add_special_tokens(
            {"bos_token": "<bos>", "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]}
        )
        tok.chat_template = GEMMA_TEMPLATE
        model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "m")
        model.resize_token_embeddings(len(tok))
        model.save_pretrained(tmp_path / "m")
        tok.save_pretrained(tmp_path / "m")
        directory = tmp_path / "m"
    else:
        directory = build(tmp_path / "m")
    engine = _engine(directory)
    trained = engine.encode([(CONV, REPLY)])[0]
    expected = _plain_reward(directory, trained.ids)
    variants = _variants(engine.tokenizer, trained.ids)
    assert len(variants) >= 3
    for name, ids in variants.items():
        served = engine.encode_served(ids)
        assert served.ids == trained.ids, name
        assert engine.outputs([served])[0][0] == pytest.approx(expected, abs=1e-5), name
        text = engine.tokenizer.decode(ids, skip_special_tokens=False)
        assert engine.encode_text(text).ids == trained.ids, name
    # not a complete turn (a cut reply, plain text): scored as sent
    for ids in (trained.ids[:-2], engine.tokenizer("just some text", add_special_tokens=False)["input_ids"]):
        assert engine.encode_served(ids).ids == ids


def test_the_read_rule_fails_without_it(tmp_path):
    """The defect it fixes: OpenRLHF's ChatML query (ending in <|im_end|>) read at another token."""
    engine = _engine(build_qwen2_chatml(tmp_path / "m"))
    trained = engine.encode([(CONV, REPLY)])[0]
    as_sent = engine.encode_ids(trained.ids[:-1])  # OpenRLHF's query, tokenized as it is
    assert abs(engine.outputs([as_sent])[0][0] - engine.outputs([trained])[0][0]) > 0.05


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    need("fastapi")
    return build_spread_bert(tmp_path_factory.mktemp("proto_bert"), mean=None)


def _post_and_vanish(port: int, body: dict, wait: float = 0.3) -> None:
    """Send a request, then close the connection before the answer (a client that timed out)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(
        b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(data)).encode()
        + b"\r\n\r\n"
        + data
    )
    time.sleep(wait)
    s.close()


def test_abandoned_work_is_dropped_and_every_metric_moves(bert):
    """A client that disconnects takes its queued texts with it: the next request is answered at
    once, not after the abandoned work; /metrics counts truncated, refused, cancelled and normal."""
    # --max-batch-tokens 200 (about 4 texts a batch): the abandoned 4,000 would take a thousand batches.
    proc = ServeProcess(
        bert, "--max-batch-tokens", "200", "--max-items", "5000", "--max-queue", "5000", "--max-body-mb", "4"
    )
    try:
        alone = time.perf_counter()
        assert proc.post("/get_reward", {"query": ["[CLS] q [SEP] a [SEP]"]})[0] == 200
        alone = time.perf_counter() - alone
        _post_and_vanish(
            proc.port, {"query": [f"[CLS] question {i} [SEP] " + "answer " * 40 + "[SEP]" for i in range(4000)]}
        )
        started = time.perf_counter()
        status, _, _ = proc.post("/get_reward", {"query": ["[CLS] next [SEP] one [SEP]"]})
        after = time.perf_counter() - started
        # A bound on a loaded machine (2.1 s was seen at load 3 with two test workers); the abandoned 4,000 texts
        # would take many times that, and items_scored_total below checks that they were dropped, untimed.
        assert status == 200 and after < max(5.0, 20 * alone), (after, alone)
        # truncated, 413 and 503-free normal requests
        assert proc.post("/get_reward", {"query": ["[CLS] " + "word " * 700 + "[SEP] end [SEP]"]})[0] == 200
        assert proc.post("/get_reward", {"query": ["x"] * 5001})[0] == 413
        time.sleep(0.5)
        _, text = proc.get("/metrics")
        assert metric(text, "rmspec_truncated_total") == 1
        assert metric(text, "rmspec_too_large_total") == 1
        assert metric(text, "rmspec_cancelled_requests_total") == 1
        assert metric(text, "rmspec_cancelled_items_total") > 3000  # most of the 4,000 never ran
        assert metric(text, "rmspec_requests_total", route="/get_reward", status="200") == 3
        assert metric(text, "rmspec_requests_total", route="/get_reward", status="413") == 1
        assert metric(text, "rmspec_requests_total", route="/get_reward", status="499") == 1
        assert metric(text, "rmspec_items_scored_total") < 1000
        assert "Traceback" not in proc.log()
    finally:
        proc.stop()


def test_sigterm_exits_within_the_shutdown_timeout(bert):
    proc = ServeProcess(bert, "--shutdown-timeout", "2", "--max-wait-ms", "1")
    try:
        assert proc.post("/get_reward", {"query": ["[CLS] q [SEP] a [SEP]"]})[0] == 200
        started = time.perf_counter()
        code = proc.terminate()
        assert code == 0 and time.perf_counter() - started < 5, proc.log_path.read_text()
        assert "stopped" in proc.log_path.read_text()
        assert "Loading weights" not in proc.log_path.read_text()  # transformers' bar: noise in a server's log
    finally:
        proc.stop()


def test_segments_switch(bert):
    """--segments training (default) equals rmspec's training layout; --segments plain equals
    model(**tokenizer(text)), what OpenRLHF's own server and vLLM compute."""
    engine = _engine(bert)
    trained = engine.encode([("What colour is the sky?", "Blue, on a clear day.")])[0]
    text = engine.tokenizer.decode(trained.ids)
    tok_out = engine.tokenizer(text, add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        plain = engine.model(**tok_out).logits[0, 0].item()
    training = engine.outputs([trained])[0][0]
    assert abs(plain - training) > 1e-4  # the two choices really differ on this model
    for flag, expected in (("training", training), ("plain", plain)):
        proc = ServeProcess(bert, "--segments", flag)
        try:
            status, body, _ = proc.post("/get_reward", {"query": [text]})
            assert status == 200 and body["rewards"][0] == pytest.approx(expected, abs=1e-5), flag
            assert json.loads(proc.get("/health")[1])["segments"] == flag
        finally:
            proc.stop()


def test_default_limits_take_an_openrlhf_0_9_rollout_batch(bert):
    """OpenRLHF <= 0.9 post rollout_batch_size (1,024) x n_samples_per_prompt queries at once."""
    proc = ServeProcess(bert)
    try:
        queries = [f"[CLS] q{i} [SEP] a [SEP]" for i in range(1025)]
        status, body, _ = proc.post("/get_reward", {"query": queries, "prompts": queries, "labels": [None] * 1025})
        assert status == 200 and len(body["rewards"]) == 1025
        status, body, _ = proc.post("/get_reward", {"query": ["x"] * 16385})
        assert status == 413 and "--max-items" in body["error"]["message"]
        status, models = proc.get("/v1/models")
        card = json.loads(models)["data"][0]
        assert {"id", "object", "created", "owned_by", "root", "parent", "max_model_len", "permission"} <= set(card)
    finally:
        proc.stop()


def test_waiting_requests_finish_while_one_client_vanishes(bert):
    """Cancelling one request leaves the others in its batch untouched."""
    proc = ServeProcess(bert, "--max-wait-ms", "500")
    try:
        results = []
        threads = [
            threading.Thread(
                target=lambda i=i: results.append(proc.post("/get_reward", {"query": [f"[CLS] q{i} [SEP] a [SEP]"]}))
            )
            for i in range(4)
        ]
        for t in threads:
            t.start()
        _post_and_vanish(proc.port, {"query": ["[CLS] gone [SEP] a [SEP]"] * 50}, wait=0.1)
        for t in threads:
            t.join(timeout=60)
        assert sorted(r[0] for r in results) == [200] * 4
    finally:
        proc.stop()
