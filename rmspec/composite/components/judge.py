"""`judge`: an LLM judge on an OpenAI-compatible endpoint scores each response against a rubric.

One request per row to `{base_url}/chat/completions` (`rmspec serve` of a trained judge is such an
endpoint), `concurrency` at a time, each under `timeout_s`. The score is read from the LAST match
of `pattern` in the reply (the prompt asks the judge to end with it; an earlier match echoes the
instructions or quotes the response). A failure is counted, never a 0: `endpoint_error` (refused
connection, an HTTP error status, a body that is not a chat completion), `timeout`,
`invalid_output` (no score in the reply, one outside the scale, or a match that captured none).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome, failed, ok
from rmspec.errors import RmspecError
from rmspec.spec.composite_models import JudgeComponent


def prompt_text(prompt: Any) -> str:
    """The question as the judge reads it: text as given; chat messages as `role: content` lines."""
    if isinstance(prompt, list):
        return "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in prompt if isinstance(m, dict))
    return "" if prompt is None else str(prompt)


def judge_messages(settings: JudgeComponent, principles: Sequence[str], item: Item) -> list[dict[str, str]]:
    """The chat request for one row (tests rebuild it with this function to ask the judge directly)."""
    lo, hi = settings.scale.min, settings.scale.max
    rubric = "\n".join(f"- {p}" for p in principles)
    system = (
        "You are a strict grader. Score the response against these principles:\n"
        f"{rubric}\n"
        f"Give one score from {lo:g} to {hi:g} (higher is better) and end your reply with it in double "
        f"brackets, e.g. [[{hi:g}]]."
    )
    user = f"Question:\n{prompt_text(item.prompt)}\n\nResponse:\n{item.response}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_score(reply: str, pattern: re.Pattern[str], low: float, high: float) -> Outcome:
    """The LAST match of the pattern: the prompt asks the judge to end its reply with the score, so an
    earlier match is an echo of the instructions or a quote of the response, never the verdict. The
    score is that match's first group that took part in it (a pattern with alternatives)."""
    found = None
    for found in pattern.finditer(reply):  # noqa: B007  # the last one is kept
        pass
    if found is None:
        return failed("invalid_output", "no score matching the pattern in the judge's reply")
    text = next((g for g in found.groups() if g is not None), None)
    if text is None:
        return failed("invalid_output", "the pattern matched but captured no score")
    try:
        value = float(text)
    except ValueError:
        return failed("invalid_output", f"the judge's score {text[:40]!r} is not a number")
    if not low <= value <= high:
        return failed("invalid_output", f"the judge's score {value:g} is outside [{low:g}, {high:g}]")
    return ok(value)


class Judge:
    needs_reference = False

    def __init__(self, settings: JudgeComponent, principles: list[str]):
        self.settings, self.principles = settings, principles
        self.pattern = re.compile(settings.pattern)
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self.headers = {}
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env)
            if not key:
                raise RmspecError(
                    f"component {settings.name}: the environment variable {settings.api_key_env} is not set",
                    f"export {settings.api_key_env}=<token>, or remove api_key_env for an endpoint without auth",
                )
            self.headers["Authorization"] = f"Bearer {key}"

    def _one(self, client: Any, item: Item) -> Outcome:
        import httpx

        s = self.settings
        body = {
            "model": s.model,
            "messages": judge_messages(s, self.principles, item),
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
        }
        try:
            answer = client.post(self.url, json=body, headers=self.headers)
        except httpx.TimeoutException:
            return failed("timeout", f"no answer from {self.url} within {s.timeout_s:g} s")
        except httpx.HTTPError as exc:
            return failed("endpoint_error", f"{type(exc).__name__} on {self.url}")
        if answer.status_code != 200:
            return failed("endpoint_error", f"HTTP {answer.status_code} from {self.url}")
        try:
            reply = answer.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return failed("endpoint_error", f"{self.url} did not answer with a chat completion")
        if not isinstance(reply, str):
            return failed("endpoint_error", f"{self.url} answered no text")
        return parse_score(reply, self.pattern, s.scale.min, s.scale.max)

    def score(self, items: Sequence[Item]) -> list[Outcome]:
        import httpx

        if not items:
            return []
        with (
            httpx.Client(timeout=self.settings.timeout_s) as client,
            ThreadPoolExecutor(max_workers=self.settings.concurrency) as pool,
        ):
            return list(pool.map(lambda item: self._one(client, item), items))


def load_rubric(settings: JudgeComponent, context: Context) -> list[str]:
    if isinstance(settings.rubric, list):
        principles = [p for p in settings.rubric if p.strip()]
    else:
        path = context.resolve(settings.rubric)
        try:
            principles = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except OSError as exc:
            raise RmspecError(
                f"component {settings.name}: cannot read the rubric {path}: {exc.strerror}",
                "give a text file with one principle per line, or the principles as a list",
            ) from None
    if not principles:
        raise RmspecError(f"component {settings.name}: the rubric has no principle", "write at least one principle")
    return principles


def build(settings: JudgeComponent, context: Context) -> Judge:
    return Judge(settings, load_rubric(settings, context))
