"""`rmspec serve` on a vision reward model (the tiny offline Qwen2-VL) under pictures meant to take it
down (issue 47 items 5-8): twelve 7999 x 7999 PNGs are refused in under a second from their headers,
the process's peak memory unchanged; the image count; an EPS labelled image/png; a URL on loopback
refused without a connection (open and closed ports answer the same); a URL that sends a byte a
second leaves /health answering at once (a real uvicorn server); /get_reward names the route that
answers; and every route of every scorer kind that builds in a second answers 4xx, never 500."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import resource
import socket
import struct
import threading
import time
import zlib
from pathlib import Path

import pytest

from helpers.ci import need

need("torch")
need("fastapi")

from PIL import Image  # noqa: E402

from rmspec.serve.service import Limits  # noqa: E402

PROMPT = "What colour is the picture?"


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    from rmspec.vision.tiny import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"), seed=3)


@pytest.fixture(scope="module")
def engine(tiny_vlm):
    from rmspec.inference.engine import load_scorer

    return load_scorer(tiny_vlm)


def app(engine, limits: Limits | None = None):
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    return create_app(Service(engine, model_name="m", normalize=False, limits=limits))


def client(engine, limits: Limits | None = None):
    from fastapi.testclient import TestClient

    return TestClient(app(engine, limits), raise_server_exceptions=False)


def big_png(width: int, height: int) -> bytes:
    """A real, valid grey PNG of width x height (every pixel decodes), written row by row: 62 KB for
    7999 x 7999, so twelve fit in a request of 1 MB, and 64 MB each once decoded (192 MB as RGB)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    packer = zlib.compressobj(9)
    row = b"\0" * (width + 1)  # filter byte + one grey byte per pixel
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def png(colour=(200, 30, 10), size=(24, 24)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def uri(data: bytes, kind: str = "image/png") -> str:
    return f"data:{kind};base64," + base64.b64encode(data).decode()


def request(urls: list[str]) -> dict:
    parts = [{"type": "image_url", "image_url": {"url": u}} for u in urls] + [{"type": "text", "text": PROMPT}]
    return {"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": "Grey."}]}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_twelve_8k_pictures_are_refused_within_a_second_before_any_is_decoded(engine):
    picture = big_png(7999, 7999)
    assert Image.open(io.BytesIO(picture)).size == (7999, 7999) and len(picture) < 100_000
    body = request([uri(picture)] * 12)
    with client(engine) as c:
        before = peak_rss_mb()
        started = time.perf_counter()
        answer = c.post("/pooling", json=body)
        took = time.perf_counter() - started
        grown = peak_rss_mb() - before
    assert answer.status_code == 413, answer.text
    message = answer.json()["error"]["message"]
    assert "--max-request-megapixels" in message and "64,000,000 decoded pixels per request" in message
    assert answer.json()["error"]["param"] == "messages.0.content.1"  # the second picture passes the budget
    assert took < 1.0, took
    assert grown < 100, grown  # one decoded picture alone is 192 MB of RGB


def test_the_budget_and_the_count_are_flags_and_within_them_pictures_score(engine):
    small = uri(png())
    with client(engine, Limits(max_images=3, max_request_pixels=3 * 24 * 24)) as c:
        four = c.post("/classify", json=request([small] * 4))
        assert four.status_code == 413 and "4 images in one request, over the limit of 3" in four.text
        assert "--max-images" in four.text
        three = c.post("/classify", json=request([small] * 3))
        assert three.status_code == 200, three.text
        wider = c.post("/classify", json=request([small, small, uri(png(size=(25, 24)))]))
        assert wider.status_code == 413 and "1,752 pixels by this one, over the limit of 1,728" in wider.text


def test_formats_are_the_decoders_choice_not_the_declared_type(engine):
    picture = Image.new("RGB", (16, 16), (0, 0, 255))
    eps, tiff = io.BytesIO(), io.BytesIO()
    picture.save(eps, format="EPS")
    picture.save(tiff, format="TIFF")
    with client(engine) as c:
        for data in (eps.getvalue(), tiff.getvalue()):
            answer = c.post("/pooling", json=request([uri(png()), uri(data, "image/png")]))
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["param"] == "messages.0.content.1"
            assert "not a PNG, JPEG, WebP, GIF or BMP image" in answer.text


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_url_on_loopback_is_refused_without_a_connection_and_ports_cannot_be_told_apart(engine):
    import select

    sock = listening()
    try:
        answers = []
        with client(engine, Limits(allow_image_urls=True, image_url_timeout=2)) as c:
            for port in (sock.getsockname()[1], free_port()):
                answer = c.post("/pooling", json=request([f"http://127.0.0.1:{port}/a.png"]))
                answers.append((answer.status_code, answer.text.replace(str(port), "PORT")))
        assert answers[0] == answers[1]
        status, text = answers[0]
        assert status == 400 and "internal address" in text and "--allow-image-hosts" in text
        assert not select.select([sock], [], [], 0.2)[0]  # nothing reached the listening socket
    finally:
        sock.close()


class Drip:
    """An HTTP server on 127.0.0.1 that sends an image's headers, then one byte a second."""

    def __init__(self) -> None:
        self.sock = listening()
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 100000\r\n\r\n")
            while not self.stop.is_set():
                conn.sendall(b"\0")
                time.sleep(1)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@contextlib.contextmanager
def uvicorn_server(asgi):
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def call(address: str, method: str, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, str]:
    import http.client

    host, port = address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    conn.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read().decode()


def test_a_slow_drip_url_does_not_block_health_and_ends_at_its_deadline(engine):
    drip = Drip()
    limits = Limits(allow_image_urls=True, allow_image_hosts=("127.0.0.1",), image_url_timeout=3.0)
    try:
        with uvicorn_server(app(engine, limits)) as address:
            answer: dict = {}

            def slow() -> None:
                started = time.perf_counter()
                answer["reply"] = call(address, "POST", "/pooling", request([f"http://127.0.0.1:{drip.port}/a.png"]))
                answer["took"] = time.perf_counter() - started

            worker = threading.Thread(target=slow)
            worker.start()
            time.sleep(0.5)  # the download is under way
            waits = []
            for _ in range(4):
                started = time.perf_counter()
                status, _ = call(address, "GET", "/health")
                waits.append(time.perf_counter() - started)
                assert status == 200
                time.sleep(0.2)
            worker.join(15)
    finally:
        drip.close()
    assert max(waits) < 1.0, waits  # on the loop it would wait for the 3 s download
    status, text = answer["reply"]
    assert status == 400 and "download_failed" in text and "no complete answer within 3 s" in text
    assert "--image-url-timeout" in text
    assert 2.9 < answer["took"] < 6.0, answer["took"]


def test_get_reward_on_a_vision_model_names_the_route_that_answers(engine):
    with client(engine) as c:
        answer = c.post("/get_reward", json={"query": ["<image>What colour? Grey."]})
        chat = c.post("/v1/chat/completions", json=request([uri(png())]))
    assert answer.status_code == 400 and "/classify" in answer.text and "image_url" in answer.text
    assert chat.status_code == 400 and "/classify" in chat.text and "/get_reward" not in chat.text


def judge_run(run: Path) -> Path:
    """A generative judge's run directory: a random 2-layer Llama with MiniLM's tokenizer and the shipped
    judge spec (as tests/test_serve_judge.py builds it)."""
    import torch
    import transformers

    from helpers.models import tiny_judge_parts

    repo = Path(__file__).parents[1]
    tokenizer, config = tiny_judge_parts("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(run / "model")
    tokenizer.save_pretrained(run / "model")
    spec = (repo / "specs" / "judge_generative.yaml").read_text()
    spec = spec.replace("../rmspec/data/demo/judge_messages.jsonl", str(repo / "rmspec/data/demo/judge_messages.jsonl"))
    (run / "spec.yaml").write_text(spec.replace("max_new_tokens: 32", "max_new_tokens: 2"))
    return run


def kinds(root: Path, tiny_vlm: Path) -> dict:
    """One tiny model of each scorer kind, loaded (pointwise is the reward kind with several outputs)."""
    from helpers.composite import write_composite_run
    from helpers.scoring_models import build_tiny_bert, build_trl_style_prm
    from rmspec.inference.engine import load_scorer

    rep = {"name": "rep", "kind": "repetition", "ngram": 2, "weight": 1.0}
    composite = {"kind": "composite", "components": [rep], "on_failure": {"value": 0.0}}
    return {
        "reward": load_scorer(build_tiny_bert(root / "bert")),
        "process": load_scorer(build_trl_style_prm(root / "prm", 0), step_separator=" ;"),
        "composite": load_scorer(write_composite_run(root / "composite", composite)),
        "judge": load_scorer(judge_run(root / "judge")),
        "vision_reward": load_scorer(tiny_vlm),
    }


def test_every_route_of_every_scorer_kind_answers_4xx_not_500(tmp_path, tiny_vlm):
    text = [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello."}]
    pictured = request([uri(png())])["messages"]
    asks = [
        ("/get_reward", {"query": ["Hi? Hello."], "prompts": ["Hi? "]}),
        ("/get_reward", {"query": "Hi"}),
        ("/classify", {"input": "Hi? Hello."}),
        ("/classify", {"input": [1, 2, 3]}),
        ("/classify", {"messages": text}),
        ("/v1/classify", {"messages": pictured}),
        ("/pooling", {"input": "Hi? Hello.", "task": "token_classify"}),
        ("/pooling", {"input": "Hi? Hello."}),
        ("/pooling", {"messages": pictured}),
        ("/pooling", {"messages": pictured, "task": "token_classify"}),
        ("/v1/chat/completions", {"messages": text}),
        ("/v1/chat/completions", {"messages": pictured}),
    ]
    failures = []
    for name, engine in kinds(tmp_path, tiny_vlm).items():
        assert str(engine.kind) == name
        with client(engine) as c:
            for path, body in asks:
                answer = c.post(path, json=body)
                if answer.status_code >= 500:
                    failures.append((name, path, json.dumps(body)[:60], answer.text))
                elif answer.status_code >= 400:  # a refusal names where to go or what to fix
                    assert answer.json()["error"]["message"], (name, path)
            for path in ("/health", "/metrics", "/v1/models"):
                assert c.get(path).status_code == 200, (name, path)
    assert failures == []


def test_the_flags_are_documented_and_allowed_hosts_need_urls(cli, tmp_path):
    result = cli("serve", str(tmp_path), "--allow-image-hosts", "10.0.0.0/8")
    assert result.code == 2 and "--allow-image-urls" in result.err and "Traceback" not in result.err
    text = cli("serve", "--help").out
    for flag in ("--max-images", "--max-request-megapixels", "--allow-image-hosts", "--image-url-timeout"):
        assert flag in text
        assert flag in (Path(__file__).parents[1] / "docs" / "score_and_serve.md").read_text()


def test_a_guard_reads_hosts_names_and_networks():
    import ipaddress

    from rmspec.vision.fetch import Guard

    guard = Guard.of(["images.internal, 10.2.0.0/16", "[::1]"])
    assert guard.allowed == ("images.internal", "10.2.0.0/16", "::1")
    ip = ipaddress.ip_address
    assert guard.permits("images.internal", ip("10.9.9.9"))  # the name as written in the URL
    assert guard.permits("other", ip("10.2.3.4")) and not guard.permits("other", ip("10.3.0.1"))
    assert guard.permits("::1", ip("::1")) and not guard.permits("localhost", ip("127.0.0.1"))
    assert guard.permits("example.com", ip("93.184.216.34"))  # public: no need to name it


def test_the_flags_reach_the_servers_limits(cli, tiny_vlm, monkeypatch):
    import rmspec.serve.server as server

    seen = {}
    monkeypatch.setattr(server, "serve", lambda target, **kwargs: seen.update(kwargs))
    flags = ["--max-images", "3", "--max-request-megapixels", "2.5", "--allow-image-urls", "--image-url-timeout", "4"]
    result = cli(
        "serve", str(tiny_vlm), *flags, "--allow-image-hosts", "a.internal,10.0.0.0/8", "--allow-image-hosts", "b"
    )
    assert result.code == 0, result.err
    limits = seen["limits"]
    assert (limits.max_images, limits.max_request_pixels, limits.image_url_timeout) == (3, 2_500_000, 4.0)
    assert limits.allow_image_urls and limits.guard().allowed == ("a.internal", "10.0.0.0/8", "b")
    defaults = Limits()
    assert (defaults.max_images, defaults.max_request_pixels, defaults.image_url_timeout) == (16, 64_000_000, 10.0)


def test_the_server_holds_at_most_four_request_budgets_of_decoded_pixels(engine):
    """Decoded pictures wait in the queue for the model: the server counts their pixels from the headers
    before decoding, refuses a request past 4 budgets with 503 + Retry-After, and gives them back when
    the request is answered (or refused)."""
    from fastapi.testclient import TestClient

    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    service = Service(engine, model_name="m", normalize=False, limits=Limits(max_request_pixels=1000))
    assert service.pixel_capacity == 4000
    small = uri(png(size=(20, 20)))  # 400 pixels
    with TestClient(create_app(service)) as c:
        assert c.post("/pooling", json=request([small, small])).status_code == 200
        assert service.pixels_held == 0  # given back once answered
        service.pixels_held = 3500  # other requests' pictures, waiting for the model
        busy = c.post("/pooling", json=request([small, small]))
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1", busy.text
        assert "3,500 decoded pixels of other requests' images (capacity 4,000" in busy.text
        assert service.pixels_held == 3500
        service.pixels_held = 3200
        assert c.post("/classify", json=request([small, small])).status_code == 200
        too_big = c.post("/classify", json=request([small, small, small]))  # its own budget first: 413
        assert too_big.status_code == 413 and service.pixels_held == 3200
