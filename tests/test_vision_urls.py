"""Images given as http(s) URLs: refused unless the spec allows downloads (data.images.allow_urls), the
reject naming the option; allowed, each image is downloaded once in the data stage and checked as a
local file is (a 404, a timeout, a refused connection, a page that is no image, a body over the byte
limit, a decompression bomb, a truncated file: each a reject with its reason at the row's file:line,
counted in the data report), and a kept row carries the bytes that came (a data: URI), so training never
downloads. `rmspec score --allow-image-urls` reads URLs the same way. A real HTTP server on 127.0.0.1
serves the files; nothing else is reached."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from helpers.data import bert_tokenizer, make_spec, read_jsonl, write_jsonl
from rmspec.data import prepare
from rmspec.vision.images import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS, ImageReject, decode_image

LIMIT_MB = 0.02  # data.images.max_mb in these specs: 20,971 bytes
LIMIT = int(LIMIT_MB * 1024 * 1024)
TIMEOUT = 0.5  # data.images.download_timeout; /slow.png answers after 4 s


def png(colour, size=(16, 16), mode="RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


RED = png((255, 0, 0))
BLUE = png((0, 0, 255), (40, 40))
BOMB = png(0, (9000, 9000), "1")  # 81 Mpx in a few kB: over the 64 Mpx limit
NOISE = bytes(range(256)) * (LIMIT // 256 + 8)  # over the byte limit
FILES = {
    "/red.png": (200, "image/png", RED),
    "/blue.png": (200, "image/png", BLUE),
    "/page.html": (200, "text/html", b"<html><body>not a picture</body></html>"),
    "/big.png": (200, "image/png", NOISE),
    "/bomb.png": (200, "image/png", BOMB),
    "/cut.png": (200, "image/png", png((0, 0, 255), (64, 64))[:60]),
}


class Handler(BaseHTTPRequestHandler):
    hits: Counter = Counter()

    def do_GET(self):  # noqa: N802 (http.server's name)
        Handler.hits[self.path] += 1
        if self.path == "/slow.png":
            time.sleep(4)
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path[len("/redirect?to=") :])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/drip.png":  # a valid header, then one byte of body a second (Content-Length 1000)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            with contextlib.suppress(OSError):
                for byte in RED[:20]:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(1)
            return
        if self.path == "/drip-headers.png":  # even the status line comes one byte a second
            with contextlib.suppress(OSError):
                for byte in b"HTTP/1.0 200 OK\r\nContent-Type: image/png\r\n\r\n":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(1)
            return
        if self.path == "/stream.png":  # no Content-Length: the reader must stop past the limit itself
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            for _ in range(40):
                self.wfile.write(NOISE[:4096])
            return
        status, kind, body = FILES.get(self.path, (404, "text/plain", b"no such file"))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client stopped reading (the byte limit)
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    Handler.hits = Counter()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def url_rows(base: str) -> list[tuple[dict, str | None, str]]:
    """(row, its reject reason or None, a text its reject detail holds)."""
    cases = [
        ("/red.png", None, ""),
        ("/gone.png", "image_download_failed", "HTTP 404"),
        ("/page.html", "image_undecodable", "not a PNG, JPEG, WebP, GIF or BMP image"),
        ("/big.png", "image_too_many_bytes", f"over the limit of {LIMIT}"),
        ("/stream.png", "image_too_many_bytes", f"over the limit of {LIMIT}"),
        ("/bomb.png", "image_too_many_pixels", "over the limit of 64000000"),
        ("/cut.png", "image_truncated", "/cut.png"),
        ("/slow.png", "image_download_failed", f"no complete answer within {TIMEOUT:g} s"),
    ]
    rows = [
        ({"prompt": "<image>Colour?", "chosen": f"c{i}", "rejected": f"r{i}", "images": [base + path]}, reason, text)
        for i, (path, reason, text) in enumerate(cases)
    ]
    refused = f"http://127.0.0.1:{closed_port()}/red.png"
    rows.append(
        (
            {"prompt": "<image>Colour?", "chosen": "x", "rejected": "y", "images": [refused]},
            "image_download_failed",
            refused,
        )
    )
    return rows


def prepared(tmp_path, rows, images=None):
    write_jsonl(tmp_path / "pairs.jsonl", [r for r, _, _ in rows])
    data = {"source": {"kind": "files", "paths": ["pairs.jsonl"]}, "mapping": {"preset": "pairs"}}
    loaded = make_spec(tmp_path, {**data, **({"images": images} if images else {})})
    rejects = tmp_path / "out" / "rejects.jsonl"
    result = prepare(loaded, bert_tokenizer(), rejects_path=rejects, cache_dir=tmp_path / "cache")
    return result, read_jsonl(rejects)


def test_allowed_downloads_are_checked_as_files_are_and_kept_as_the_bytes_that_came(tmp_path, server):
    rows = url_rows(server)
    result, rejects = prepared(tmp_path, rows, {"allow_urls": True, "max_mb": LIMIT_MB, "download_timeout": TIMEOUT})
    assert {r["source_index"]: r["reason"] for r in rejects} == {i: why for i, (_, why, _) in enumerate(rows) if why}
    data_file = str(tmp_path / "pairs.jsonl")
    for line in rejects:
        _, _, text = rows[line["source_index"]]
        assert line["detail"].startswith(f"{data_file}:{line['source_index'] + 1}: images[0]: ")
        assert text in line["detail"], line["detail"]
    assert result.report.to_json()["rejected"] == dict(Counter(why for _, why, _ in rows if why))
    (kept,) = result.train.to_list()
    (reference,) = kept["images"]
    assert reference.startswith("data:")  # the bytes that came, not the URL
    hits = Handler.hits["/red.png"]
    assert decode_image(reference).tobytes() == Image.open(io.BytesIO(RED)).convert("RGB").tobytes()
    assert Handler.hits["/red.png"] == hits == 1  # downloaded once; reading the reference fetches nothing
    assert Handler.hits["/big.png"] == 1 and Handler.hits["/stream.png"] == 1


def test_urls_are_refused_unless_allowed_and_the_reject_names_the_option(tmp_path, server):
    (tmp_path / "red.png").write_bytes(RED)
    local = {"prompt": "<image>Colour?", "chosen": "a", "rejected": "b", "images": ["red.png"]}
    rows = [(row, "image_url_refused", "") for row, _, _ in url_rows(server)] + [(local, None, "")]
    result, rejects = prepared(tmp_path, rows)
    assert [r["reason"] for r in rejects] == ["image_url_refused"] * (len(rows) - 1)
    assert all("data.images.allow_urls: true" in r["detail"] for r in rejects)
    assert result.report.to_json()["rejected"] == {"image_url_refused": len(rows) - 1}
    assert len(result.train) == 1
    assert not Handler.hits  # nothing was requested


def test_the_spec_limits_apply_to_local_images_too(tmp_path):
    (tmp_path / "wide.png").write_bytes(png((0, 255, 0), (2000, 600)))  # 1.2 Mpx, small on disk
    (tmp_path / "red.png").write_bytes(RED)
    rows = [
        ({"prompt": "<image>Colour?", "chosen": "a", "rejected": "b", "images": ["wide.png"]}, None, ""),
        ({"prompt": "<image>Colour?", "chosen": "c", "rejected": "d", "images": ["red.png"]}, None, ""),
    ]
    result, rejects = prepared(tmp_path, rows, {"max_megapixels": 1.0})
    assert [(r["source_index"], r["reason"]) for r in rejects] == [(0, "image_too_many_pixels")]
    assert "2000x600 = 1200000 pixels, over the limit of 1000000" in rejects[0]["detail"]
    result, rejects = prepared(tmp_path, rows, {"max_megapixels": 2.0})
    assert not rejects and len(result.train) == 2


def test_decode_image_reports_a_failed_download_and_refuses_urls_unless_allowed(server):
    with pytest.raises(ImageReject) as caught:
        decode_image(server + "/gone.png", allow_urls=True)
    assert caught.value.reason == "download_failed" and "HTTP 404" in caught.value.detail
    with pytest.raises(ImageReject) as caught:
        decode_image({"path": server + "/red.png"})  # an image feature naming its file by URL only
    assert caught.value.reason == "url_refused"
    assert decode_image({"path": server + "/red.png"}, allow_urls=True).getpixel((0, 0)) == (255, 0, 0)


def test_spec_defaults_are_the_decoders():
    from rmspec.spec.data_images import ImagesSpec

    spec = ImagesSpec()
    assert (spec.max_bytes, spec.max_pixels) == (DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS)


def test_score_downloads_images_only_with_the_flag(tmp_path, server):
    """`rmspec score --allow-image-urls` scores a row whose image is a URL exactly as the same bytes given
    as a data: URI; without the flag the row is rejected, the reason naming the flag."""
    import base64
    import json

    from helpers.ci import need
    from helpers.runs import rmspec

    need("torch")
    from rmspec.vision.tiny import build_tiny_vlm

    model = build_tiny_vlm(tmp_path / "vlm", seed=3)
    uri = "data:image/png;base64," + base64.b64encode(BLUE).decode()
    rows = [
        {"prompt": "<image>What colour?", "response": "Blue.", "images": [server + "/blue.png"]},
        {"prompt": "<image>What colour?", "response": "Blue.", "images": [uri]},
        {"prompt": "<image>What colour?", "response": "Red.", "images": [server + "/gone.png"]},
    ]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def scored(*flags):
        out = tmp_path / "scored.jsonl"
        result = rmspec(
            "score", str(model), str(source), "--out", str(out), "--json", "--overwrite", *flags, cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
        rejects = [json.loads(line) for line in out.with_name("scored.rejects.jsonl").read_text().splitlines()]
        return [json.loads(line) for line in out.read_text().splitlines()], rejects

    kept, rejects = scored("--allow-image-urls")
    assert len(kept) == 2 and kept[0]["reward"] == pytest.approx(kept[1]["reward"], abs=1e-6)
    assert [(r["row"], r["reason_kind"]) for r in rejects] == [(2, "image_download_failed")]
    assert "HTTP 404" in rejects[0]["reason"]
    kept, rejects = scored()
    assert [r["images"][0] for r in kept] == [uri]
    assert [(r["row"], r["reason_kind"]) for r in rejects] == [(0, "image_url_refused"), (2, "image_url_refused")]
    assert "--allow-image-urls" in rejects[0]["reason"]


def listening() -> socket.socket:
    """A socket listening on 127.0.0.1 that never accepts: a connection to it would sit in its backlog."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def connected_to(sock: socket.socket) -> bool:
    """Whether a connection reached the listening socket (it is readable once one is in its backlog)."""
    import select

    return bool(select.select([sock], [], [], 0.2)[0])


def test_internal_addresses_are_named_as_such():
    import ipaddress

    from rmspec.vision.fetch import internal

    inside = ["127.0.0.1", "127.9.9.9", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "224.0.0.1"]
    inside += ["239.255.255.250", "0.0.0.0", "100.64.0.1", "::1", "fe80::1", "fc00::1", "ff02::1", "::ffff:127.0.0.1"]
    outside = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"]
    assert [a for a in inside if not internal(ipaddress.ip_address(a))] == []
    assert [a for a in outside if internal(ipaddress.ip_address(a))] == []


def test_a_guarded_download_refuses_loopback_without_connecting_and_open_and_closed_ports_read_the_same():
    from rmspec.vision.fetch import Guard

    sock = listening()
    try:
        open_port, closed = sock.getsockname()[1], closed_port()
        answers = []
        for port in (open_port, closed):
            with pytest.raises(ImageReject) as caught:
                decode_image(f"http://127.0.0.1:{port}/red.png", allow_urls=True, guard=Guard(), download_timeout=2)
            assert caught.value.reason == "url_refused" and "internal address" in caught.value.detail
            answers.append(caught.value.detail.replace(str(port), "PORT"))
        assert answers[0] == answers[1]
        assert not connected_to(sock)
        for url in (f"http://localhost:{open_port}/a.png", f"http://[::1]:{open_port}/a.png", "http://10.0.0.1/a.png"):
            with pytest.raises(ImageReject) as caught:
                decode_image(url, allow_urls=True, guard=Guard(), download_timeout=2)
            assert caught.value.reason == "url_refused", url
        assert not connected_to(sock)
    finally:
        sock.close()


def test_allowed_hosts_are_fetched_and_every_redirect_is_checked_again(server):
    from rmspec.vision.fetch import Guard

    port = server.rsplit(":", 1)[1]
    by_name = f"http://localhost:{port}"
    guard = Guard.of(["localhost"])  # the name as written, not the address it resolves to
    assert decode_image(by_name + "/red.png", allow_urls=True, guard=guard).getpixel((0, 0)) == (255, 0, 0)
    assert decode_image(server + "/red.png", allow_urls=True, guard=Guard.of(["127.0.0.0/8"])).size == (16, 16)
    assert decode_image(by_name + "/redirect?to=/blue.png", allow_urls=True, guard=guard).size == (40, 40)
    sock = listening()
    try:
        inside = f"http://127.0.0.1:{sock.getsockname()[1]}/red.png"
        with pytest.raises(ImageReject) as caught:
            decode_image(f"{by_name}/redirect?to={inside}", allow_urls=True, guard=guard, download_timeout=2)
        assert caught.value.reason == "url_refused" and "127.0.0.1 is an internal address" in caught.value.detail
        assert not connected_to(sock)
    finally:
        sock.close()
    assert Handler.hits[f"/redirect?to={inside}"] == 1


@pytest.mark.parametrize("path", ["/drip.png", "/drip-headers.png"])
def test_a_slow_drip_ends_at_the_total_deadline(server, path):
    """One byte a second never trips a per-read timeout; the download's total deadline ends it."""
    started = time.monotonic()
    with pytest.raises(ImageReject) as caught:
        decode_image(server + path, allow_urls=True, download_timeout=1.5)
    took = time.monotonic() - started
    assert caught.value.reason == "download_failed" and "no complete answer within 1.5 s" in caught.value.detail
    assert 1.4 < took < 3.5, took
