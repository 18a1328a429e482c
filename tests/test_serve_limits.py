"""`rmspec serve` under bad input, limits and shutdown: every status code, a token, an open bind
refused, 1,000 malformed requests survived, SIGTERM draining in-flight requests."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

from helpers.ci import need

torch = need("torch")

from helpers.serve_process import ServeProcess  # noqa: E402
from helpers.serving import build_spread_bert, need  # noqa: E402

pytestmark = pytest.mark.slow
TOKEN = "s3cret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    need("fastapi")
    return build_spread_bert(tmp_path_factory.mktemp("limits_bert"), mean=None)


@pytest.fixture(scope="module")
def server(model_dir):
    # A 4 KB body limit, 4 items per request, 3 items in the queue: each limit is reachable.
    proc = ServeProcess(
        model_dir,
        "--token-env",
        "RMSPEC_TEST_TOKEN",
        "--max-body-mb",
        str(4096 / 2**20),
        "--max-items",
        "4",
        "--max-queue",
        "3",
        env={"RMSPEC_TEST_TOKEN": TOKEN},
    )
    yield proc
    proc.stop()


def test_open_bind_without_token_is_refused(cli, model_dir, monkeypatch):
    result = cli("serve", model_dir, "--host", "0.0.0.0")
    assert (
        result.code == 2
        and "refusing to listen on 0.0.0.0 without a token" in result.err
        and "--token-env" in result.err
    )
    monkeypatch.delenv("RMSPEC_UNSET_TOKEN", raising=False)
    result = cli("serve", model_dir, "--host", "0.0.0.0", "--token-env", "RMSPEC_UNSET_TOKEN")
    assert result.code == 2 and "RMSPEC_UNSET_TOKEN" in result.err and "Traceback" not in result.err


def test_bearer_token(server):
    openai = need("openai")
    status, body, headers = server.post("/get_reward", {"query": ["hello"]})
    assert status == 401 and headers.get("www-authenticate") == "Bearer" and body["error"]["code"] == 401
    assert server.post("/get_reward", {"query": ["hello"]}, {"Authorization": "Bearer wrong"})[0] == 401
    assert server.post("/get_reward", {"query": ["hello"]}, {"Authorization": TOKEN})[0] == 401  # no scheme
    assert server.get("/metrics")[0] == 401
    assert server.get("/health")[0] == 200  # probes need no token
    status, body, _ = server.post("/get_reward", {"query": ["hello"]}, AUTH)
    assert status == 200 and len(body["rewards"]) == 1 and "raw_reward" not in body["extra_logs"]  # no stats: raw
    models = openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN).models.list()
    assert len(models.data) == 1
    assert TOKEN not in server.log()  # never logged


@pytest.mark.parametrize(
    "path, body, status, field",
    [
        ("/get_reward", b"{not json", 422, "body"),
        ("/get_reward", b"", 422, "body"),
        ("/get_reward", b"[1, 2]", 422, "body"),
        ("/get_reward", {"prompts": ["p"]}, 422, "query"),
        ("/get_reward", {"query": [1]}, 422, "query"),
        ("/get_reward", {"query": ["a"] * 5}, 413, "query"),
        ("/get_reward", {"query": ["ok", " "]}, 422, "query.1"),
        ("/get_reward", b"[" * 1500 + b"]" * 1500, 422, "body"),
        ("/get_reward", {"query": ["x" * 5000]}, 413, "body"),
        # vLLM's routes answer bad requests with 400, as vLLM does (its clients raise BadRequestError)
        ("/classify", {"input": 5}, 400, "input"),
        ("/classify", {}, 400, "input"),
        ("/classify", {"input": "a", "messages": [{"role": "user", "content": "a"}]}, 400, "input"),
        ("/classify", {"input": [[1, 2], [99999999]]}, 400, "input.1"),
        ("/classify", {"messages": [{"role": "user", "content": "hi"}]}, 400, "messages.0.role"),
        ("/classify", {"messages": [{"role": "robot", "content": "hi"}]}, 400, "messages.0.role"),
        (
            "/classify",
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": 3}]},
            400,
            "messages.1.content",
        ),
        ("/classify", {"input": "a", "truncate_prompt_tokens": -2}, 400, "truncate_prompt_tokens"),
        ("/classify", {"input": "a", "normalize": True}, 400, "normalize"),
        ("/classify", {"input": "a", "truncate_prompt_tokens": 3, "truncation_side": "right"}, 400, "truncation_side"),
        (
            "/classify",
            {
                "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
                "add_generation_prompt": True,
            },
            400,
            "add_generation_prompt",
        ),
        ("/classify", {"input": "a", "model": "another-model"}, 404, "model"),
        ("/pooling", {"input": "a", "task": "token_classify"}, 400, "task"),
        ("/pooling", {"input": "a", "encoding_format": "bytes"}, 400, "encoding_format"),
        # text that is not Unicode: 400 naming the item, on every route
        ("/get_reward", b'{"query": ["fine", "bad \\ud800 text"]}', 400, "query.1"),
        ("/classify", b'{"input": ["\\udfff"]}', 400, "input.0"),
        ("/get_reward", b'{"query": ["caf\xe9"]}', 400, "body"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, 400, "messages"),
        ("/nowhere", {"input": "a"}, 404, None),
    ],
)
def test_bad_requests_get_a_clear_4xx(server, path, body, status, field):
    got, answer, _ = server.post(path, body, AUTH)
    assert got == status, answer
    assert answer["error"]["code"] == status and answer["error"]["param"] == field
    assert answer["error"]["message"] and "Traceback" not in answer["error"]["message"]


def test_chunked_body_over_the_limit_is_413(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", "/get_reward")
    for k, v in {**AUTH, "Content-Type": "application/json", "Transfer-Encoding": "chunked"}.items():
        conn.putheader(k, v)
    conn.endheaders()
    payload = json.dumps({"query": ["y" * 6000]}).encode()
    for start in range(0, len(payload), 1000):
        piece = payload[start : start + 1000]
        conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 413 and json.loads(response.read())["error"]["param"] == "body"
    conn.close()


def test_more_items_than_the_queue_holds_is_413(server):
    """More texts than --max-queue can ever hold: 413 naming the flag, not a 503 retried forever."""
    status, body, headers = server.post("/get_reward", {"query": ["a", "b", "c", "d"]}, AUTH)
    assert status == 413 and "retry-after" not in headers and "--max-queue" in body["error"]["message"]
    assert server.post("/get_reward", {"query": ["a", "b", "c"]}, AUTH)[0] == 200  # within the queue


def test_full_queue_is_503_with_retry_after(model_dir):
    # A long batching wait keeps the first request's 2 texts queued; 2 more would overflow 3.
    proc = ServeProcess(model_dir, "--max-queue", "3", "--max-wait-ms", "3000")
    try:
        first = threading.Thread(target=proc.post, args=("/get_reward", {"query": ["a", "b"]}))
        first.start()
        time.sleep(1.0)
        status, body, headers = proc.post("/get_reward", {"query": ["c", "d"]})
        first.join(timeout=60)
        assert status == 503 and headers.get("retry-after") == "1" and "retry" in body["error"]["message"]
        assert proc.post("/get_reward", {"query": ["c", "d"]})[0] == 200  # the queue is empty again
    finally:
        proc.stop()


def test_thousand_malformed_requests_then_still_correct(server):
    good = {"query": ["[CLS] what is two plus two? [SEP] four [SEP]"]}
    status, before, _ = server.post("/get_reward", good, AUTH)
    assert status == 200
    bad = [
        b"{",
        b"null",
        b'{"query": 7}',
        b'{"query": [null]}',
        b'{"input": {}}',
        b"\xff\xfe",
        b'{"query": ["' + b"z" * 5000 + b'"]}',
    ]
    paths = ["/get_reward", "/classify", "/pooling", "/v1/chat/completions", "/get_reward/x"]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    codes = set()
    for i in range(1000):
        body = bad[i % len(bad)]
        conn.request("POST", paths[i % len(paths)], body=body, headers={**AUTH, "Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        codes.add(response.status)
        if response.getheader("Connection") == "close":
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.close()
    assert codes <= {400, 404, 413, 422} and server.proc.poll() is None
    status, after, _ = server.post("/get_reward", good, AUTH)
    assert status == 200 and after["rewards"] == pytest.approx(before["rewards"], abs=1e-6)


def test_sigterm_finishes_in_flight_requests(model_dir):
    # A long batching wait keeps the requests queued when SIGTERM arrives.
    proc = ServeProcess(model_dir, "--max-wait-ms", "1500")
    try:
        results: list = [None] * 6

        def call(i: int) -> None:
            results[i] = proc.post("/get_reward", {"query": [f"[CLS] question {i} [SEP] answer {i} [SEP]"]})

        threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        code = proc.terminate()
        for t in threads:
            t.join(timeout=60)
        assert code == 0, proc.log_path.read_text()
        assert [r[0] for r in results] == [200] * 6
        assert all(len(r[1]["rewards"]) == 1 for r in results)
    finally:
        proc.stop()
