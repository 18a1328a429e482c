"""`rmspec export RUN --to verl|openrlhf` for a composite run: the thin Python file each RL trainer
imports, calling a running `rmspec serve RUN` over HTTP (standard library only, so it imports in
any trainer's environment).

- OpenRLHF: `--reward.remote_url FILE.py` loads `reward_func(queries, prompts, labels)`; it returns
  the server's answer (`rewards`, `scores`, `extra_logs`), as OpenRLHF's HTTP client would read it.
- verl: `reward.custom_reward_function.path=FILE.py` and `.name=compute_score`; `compute_score(
  data_source, solution_str, ground_truth, extra_info)` returns {"score": reward, one value per
  component, `<component>_failed` per component}: the same keys on every row, as verl's reward
  manager gathers them into lists. `data_source` is sent as the row's route (approach.route_by).

Environment (read at each call): RMSPEC_REWARD_URL (default http://127.0.0.1:8000),
RMSPEC_REWARD_TOKEN (the server's bearer token, when it has one), RMSPEC_REWARD_TIMEOUT
(seconds, default 180). A failed request raises: the trainer logs it; nothing turns it into a 0.
"""

from __future__ import annotations

from pathlib import Path

from rmspec.composite.reward_file import read_reward_file
from rmspec.spec.composite_component import FAILURE_REASONS

TARGETS = ("verl", "openrlhf")
URL_ENV, TOKEN_ENV, TIMEOUT_ENV = "RMSPEC_REWARD_URL", "RMSPEC_REWARD_TOKEN", "RMSPEC_REWARD_TIMEOUT"

CLIENT = '''
import json
import os
import urllib.error
import urllib.request

URL_ENV, TOKEN_ENV, TIMEOUT_ENV = {url_env!r}, {token_env!r}, {timeout_env!r}
COMPONENTS = {components!r}
REASONS = {reasons!r}  # the failure reasons serve writes as `<component>_<reason>` in extra_logs


def _get_reward(body):
    """POST /get_reward to the rmspec server; an error raises with the server's message."""
    url = os.environ.get(URL_ENV, "http://127.0.0.1:8000").rstrip("/") + "/get_reward"
    headers = {{"Content-Type": "application/json"}}
    token = os.environ.get(TOKEN_ENV)
    if token:
        headers["Authorization"] = "Bearer " + token
    data = json.dumps(body, default=str).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=float(os.environ.get(TIMEOUT_ENV, "180"))) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")[:500]
        raise RuntimeError(f"rmspec serve at {{url}} answered HTTP {{err.code}}: {{detail}}") from None
'''

OPENRLHF = '''

def reward_func(queries, prompts, labels):
    """OpenRLHF's remote reward function: the server's rewards, scores and per-component extra_logs."""
    return _get_reward({{"query": list(queries), "prompts": list(prompts), "labels": list(labels)}})
'''

VERL = '''

def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """verl's custom reward function: the composite reward of one response, and its components."""
    answer = _get_reward(
        {{"query": [solution_str], "prompts": [""], "labels": [ground_truth], "routes": [data_source]}}
    )
    logs = answer.get("extra_logs") or {{}}
    out = {{"score": answer["rewards"][0]}}
    for name in COMPONENTS:
        out[name] = logs[name][0] if name in logs else 0.0
        # exact keys `<name>_<reason>`: a prefix match would read component fmt_strict's values as fmt's
        out[name + "_failed"] = float(any(logs.get(name + "_" + reason, [0.0])[0] for reason in REASONS))
    return out
'''


def export_composite(run: Path, target: str, out: Path) -> Path:
    composite, _, folder = read_reward_file(run)
    names = [c.name for c in composite.components]
    usage = {
        "openrlhf": f"--reward.remote_url {out.name}",
        "verl": f"reward.custom_reward_function.path={out.name} reward.custom_reward_function.name=compute_score",
    }[target]
    header = (
        f'"""{target} reward for the rmspec composite reward at {folder.resolve()}, written by `rmspec export`.\n\n'
        f"Start the server first: rmspec serve {folder.resolve()} --port 8000\n"
        f"Then point the trainer at this file: {usage}\n\n"
        f"Environment: {URL_ENV} (default http://127.0.0.1:8000), {TOKEN_ENV} (the server's bearer token,\n"
        f"when it has one), {TIMEOUT_ENV} (seconds, default 180). A failed request raises (never a 0).\n"
        f"Components: {', '.join(names)}.\n"
        '"""\n'
    )
    body = CLIENT.format(
        url_env=URL_ENV, token_env=TOKEN_ENV, timeout_env=TIMEOUT_ENV, components=names, reasons=list(FAILURE_REASONS)
    )
    text = header + body + (OPENRLHF if target == "openrlhf" else VERL).format()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
