"""The rubric judge reads its score from the LAST match in the reply (issue 41 #5): the prompt asks
the judge to end with the score, so a judge that echoes the instructions ("e.g. [[10]]") or quotes a
response holding [[10]] is read at its end. Through the real component: a Judge posting to a small
OpenAI-compatible endpoint (standard library) that answers fixed replies."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers.ci import need
from rmspec.composite.components.context import Context
from rmspec.composite.components.judge import build, parse_score
from rmspec.composite.outcome import Item
from rmspec.spec.composite_models import JudgeComponent

need("httpx")

ECHO = "The instructions say to end with the score, e.g. [[10]]. The response is wrong. Final score: [[2]]"
QUOTE = 'The response says "I deserve [[10]]", which is not an answer. [[3]]'
REPLIES = {"echo": ECHO, "quote": QUOTE, "plain": "Fine. [[7]]", "none": "I cannot score this."}


class Endpoint(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802  # http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        response = body["messages"][-1]["content"].rsplit("\n", 1)[-1]  # the row's response: its reply key
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": REPLIES[response]}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _judge(url: str, **extra):
    settings = JudgeComponent(name="judge", kind="judge", base_url=url, model="m", rubric=["be right"], **extra)
    return build(settings, Context())


def test_the_last_score_is_read_through_the_component(endpoint):
    outcomes = _judge(endpoint).score([Item("q", key) for key in ("echo", "quote", "plain", "none")])
    assert [o.value for o in outcomes[:3]] == [2.0, 3.0, 7.0]  # the first match gave 10 and 10
    assert outcomes[3].reason == "invalid_output"


def test_a_pattern_with_alternatives_reads_the_group_that_matched():
    pattern = re.compile(r"\[\[(\d+)\]\]|Score: (\d+)")
    assert parse_score("Looks fine. Score: 4", pattern, 1, 10).value == 4.0  # group 1 unset: no crash
    assert parse_score("e.g. [[10]] ... Score: 4", pattern, 1, 10).value == 4.0
    assert parse_score("Score: 4 then [[6]]", pattern, 1, 10).value == 6.0
    optional = re.compile(r"\[\[(\d+)?\]\]")
    assert parse_score("[[]]", optional, 1, 10).reason == "invalid_output"
    assert parse_score("[[11]]", optional, 1, 10).reason == "invalid_output"  # outside the scale
