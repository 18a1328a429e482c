"""`rmspec export RUN --to vllm -o DIR` for a process reward model: the folder vLLM serves as the token
classifier `rmspec serve --engine vllm` already uses, and what a client needs to read rmspec's per-step
rewards from it.

vLLM hosts rmspec's PRM as it is saved, `<Family>ForTokenClassification` (rmspec.export.vllm_hosting.
engine_architecture, `per_token`): `/pooling` with `"task": "token_classify"` answers the head's raw
outputs at every token. rmspec reads them at its step read points: each step is tokenized on its own, the
separator's tokens (tokenized once, alone) follow it, and the step's reward is P(correct) (softmax over the
2 labels, label 1; a sigmoid for a 1-output head) at the separator's last token; whole steps are kept from
the start up to max_length (rmspec.data.steps.StepEncoder, or TRL's layout for a PRM rmspec did not train:
rmspec.inference.process._TrlEncoder). A text sent to vLLM whole would be tokenized across the step
boundaries (and given a BOS), so the client sends token ids.

What the folder adds to the model's files (rmspec.export.vllm.write_model_folder) and serve.sh:
- `rmspec_export.json` `steps` (StepReads): the layout and the token ids that place the read points;
- `prm_client.py`: `encode(tokenizer, prompt, steps)` -> (token ids, read points) and `step_rewards(items)`,
  which posts to `/pooling` (token_classify, raw outputs) and returns `rmspec score`'s columns (step_scores,
  first_error, steps_scored, truncated); the standard library and transformers' tokenizer, no rmspec;
- `README.md`: the read points, the request, the client.

Before anything is written, the client's ids and read points are compared with rmspec's own encoding on probe
rows, and a model whose layout the client does not reproduce is refused (exit 2). `--check`
(rmspec.export.vllm_steps_check) then runs the client and `rmspec serve --engine vllm`'s engine code against
the real vLLM on this folder.
"""

from __future__ import annotations

import json
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rmspec.export.vllm_hosting import EXPORT_FILE, VLLM_VERSION, Hosting, ReadRule, refuse

CLIENT_FILE = "prm_client.py"
# Probe rows (prompt, steps) the client must encode as rmspec does: text and message prompts, a system turn,
# several turns, an empty-looking step.
PROBE_STEPS: list[tuple[Any, list[str]]] = [
    ("What is 7 + 5?", ["Add 7 and 5.", "7 + 5 = 12.", "The answer is 12."]),
    (
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "Count to 3, one step per number."},
        ],
        ["1", "2, then", " 3 (done)"],
    ),
]


@dataclass(frozen=True)
class StepReads:
    """Where rmspec reads a process reward model's per-step rewards, as token ids (rmspec_export.json `steps`)."""

    layout: str  # template (the chat template, generation prompt), plain ("User: ...\n\nAssistant:") or trl
    separator: str  # follows every step
    separator_ids: list[int]  # its tokens, tokenized alone; the read point is the last of them
    head_ids: list[int] = field(default_factory=list)  # before the prompt (plain: the tokenizer's own; trl: BOS)
    mid_ids: list[int] = field(default_factory=list)  # between the prompt and the first step (plain: "\n")
    max_length: int = 0  # whole steps are kept from the start while the ids fit
    labels: int = 2  # 2: P(correct) = softmax(outputs)[1]; 1: sigmoid(outputs[0])
    threshold: float = 0.5  # the first step with P(correct) < threshold is the predicted first error


def step_reads(scorer: Any) -> StepReads:
    """The read points of a loaded process reward model (rmspec.inference.process.StepEngine)."""
    from rmspec.data.layout import PLAIN, TEMPLATE

    encoder = scorer.encoder
    layout = getattr(encoder, "layout", None)
    head: list[int]
    mid: list[int]
    if layout is None:  # TRL's layout: [BOS] + the prompt's texts + (step + separator) ...
        bos = scorer.tokenizer.bos_token_id
        name, head, mid = "trl", [bos] if bos is not None else [], []
    elif layout.kind == TEMPLATE:
        name, head, mid = "template", [], []
    elif layout.kind == PLAIN:
        name, head, mid = "plain", list(layout.single_head), list(encoder.mid)
    else:  # an encoder's text pair: vLLM has no token classifier for these (engine_architecture refuses first)
        name, head, mid = layout.kind, list(layout.pair_head), list(encoder.mid)
    labels = int(getattr(getattr(scorer.model, "config", None), "num_labels", 2) or 2)
    return StepReads(
        name, scorer.separator, list(encoder.sep), head, mid, int(scorer.max_length), labels, float(scorer.threshold)
    )


def export_steps(run: Path, out: Path, scorer: Any, architecture: str) -> Hosting:
    """Write the vLLM folder of a process reward model; refuse (exit 2) one whose read points the client
    cannot reproduce."""
    from rmspec.export.vllm import serve_script, write_model_folder
    from rmspec.inference.target import resolve_target

    reads = step_reads(scorer)
    host = Hosting(architecture, reads.layout, reads.max_length, ReadRule(""), None, None, reads.layout == "template")
    source = client_source(reads, out)
    check_client(run, scorer, host, client_module(source), scorer.tokenizer)
    write_model_folder(Path(resolve_target(run).model_dir), out)
    serve = out / "serve.sh"
    serve.write_text(serve_script(host))
    serve.chmod(0o755)
    (out / CLIENT_FILE).write_text(source)
    (out / "README.md").write_text(readme(run, out, host, reads))
    (out / EXPORT_FILE).write_text(
        json.dumps({"run": str(run), **asdict(host), "steps": asdict(reads)}, indent=2) + "\n"
    )
    return host


def client_module(source: str, name: str = "rmspec_prm_client") -> types.ModuleType:
    """The client's source as a module (to check it before it is written, and to run it in --check)."""
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)  # noqa: S102 (rmspec's own generated source)
    return module


def load_client(folder: Path) -> types.ModuleType:
    """The exported folder's prm_client.py, as a client imports it."""
    return client_module((folder / CLIENT_FILE).read_text())


def check_client(run: Path, scorer: Any, host: Hosting, client: types.ModuleType, tokenizer: Any) -> None:
    """Refuse (exit 2) where the client's token ids or read points differ from rmspec's on the probe rows."""
    encoded = scorer.encode(PROBE_STEPS)
    for (prompt, steps), enc in zip(PROBE_STEPS, encoded):
        ids, points = client.encode(tokenizer, prompt, steps)
        want = (list(enc.ids), list(enc.ends)) if enc is not None else (ids, [])
        if (list(ids), list(points)) != want:
            raise refuse(
                run,
                host.architecture,
                f"the exported client would not read the steps where rmspec does ({host.layout} layout: "
                f"{len(ids)} tokens, read points {points}; rmspec: {len(want[0])} tokens, read points {want[1]})",
                f"serve it with `rmspec serve {run}` (POST /pooling with task token_classify, the same token ids), or `rmspec score {run} ROWS` for step_scores",
            )


def client_source(reads: StepReads, folder: Path) -> str:
    read = json.dumps(asdict(reads), indent=4)
    return f'''"""rmspec's per-step rewards from vLLM serving this folder (written by `rmspec export --to vllm`).

Start vLLM with ./serve.sh, then:

    from prm_client import step_rewards
    step_rewards([("What is 2 + 3?", ["2 + 3 = 5.", "The answer is 5."])])
    # -> [{{"step_scores": [P(correct) per step], "first_error": -1, "steps_scored": 2, "truncated": False}}]

A prompt is a text (one user turn) or a list of chat messages. Each item is encoded as rmspec encodes it
(READS, also in rmspec_export.json `steps`): the prompt as the layout renders it, then every step tokenized on
its own followed by the separator's ids; the read point of a step is the separator's last token. Whole steps
are kept from the start while the ids fit max_length (the rest are not scored: `truncated`). The ids go to
vLLM's /pooling with "task": "token_classify" and "use_activation": false (the head's raw outputs at every
token), and P(correct) is taken at the read points: softmax over the 2 labels (label 1), or a sigmoid for a
1-output head. The same numbers as `rmspec score` (checked by `rmspec export ... --to vllm --check`).
Environment: RMSPEC_VLLM_URL (default http://127.0.0.1:8000), RMSPEC_VLLM_MODEL (default this folder).
"""

import json
import math
import os
import time
import urllib.error
import urllib.request

READS = {read}
URL = os.environ.get("RMSPEC_VLLM_URL", "http://127.0.0.1:8000").rstrip("/")
MODEL = os.environ.get("RMSPEC_VLLM_MODEL", {str(folder)!r})
HERE = {str(folder)!r}
NAMES = {{"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}}


def load_tokenizer(path=HERE):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def _ids(tokenizer, text):
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def prompt_ids(tokenizer, prompt):
    """The prompt's token ids before the first step, as rmspec lays it out."""
    messages = [{{"role": "user", "content": prompt}}] if isinstance(prompt, str) else list(prompt)
    layout = READS["layout"]
    if layout == "template":
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return _ids(tokenizer, text)
    if layout == "plain":
        turns = "\\n\\n".join(NAMES[m["role"]] + ": " + m["content"] for m in messages)
        text = (turns + "\\n\\n" if messages else "") + "Assistant:"
        return READS["head_ids"] + _ids(tokenizer, text) + READS["mid_ids"]
    return READS["head_ids"] + _ids(tokenizer, "\\n\\n".join(m["content"] for m in messages))


def encode(tokenizer, prompt, steps):
    """(token ids, read points): the index of each kept step's last token (its separator's last)."""
    ids = prompt_ids(tokenizer, prompt)
    points = []
    for step in steps:
        piece = _ids(tokenizer, step) + READS["separator_ids"]
        if len(ids) + len(piece) > READS["max_length"]:
            break
        ids = ids + piece
        points.append(len(ids) - 1)
    return ids, points


def correct(outputs):
    """P(correct) from the head's raw outputs at one token."""
    if len(outputs) == 1:
        return 1.0 / (1.0 + math.exp(-outputs[0]))
    top = max(outputs)
    exps = [math.exp(v - top) for v in outputs]
    return exps[1] / sum(exps)


def _post(body, url, tries=5):
    request = urllib.request.Request(url + "/pooling", json.dumps(body).encode(), {{"Content-Type": "application/json"}})
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(request, timeout=300) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError:
            raise  # vLLM's 4xx: the request itself is wrong, a retry would fail again
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(1)


def step_rewards(items, tokenizer=None, url=None, model=None):
    """[(prompt, [step, ...]), ...] -> per item: step_scores, first_error, steps_scored, truncated."""
    tokenizer = tokenizer or load_tokenizer()
    encoded = [encode(tokenizer, prompt, steps) for prompt, steps in items]
    live = [i for i, (_, points) in enumerate(encoded) if points]
    outputs = {{}}
    if live:
        body = {{
            "model": model or MODEL,
            "input": [encoded[i][0] for i in live],
            "task": "token_classify",
            "use_activation": False,
        }}
        data = sorted(_post(body, (url or URL).rstrip("/"))["data"], key=lambda item: item["index"])
        outputs = {{i: item["data"] for i, item in zip(live, data)}}
    out = []
    for i, (prompt, steps) in enumerate(items):
        points = encoded[i][1]
        scores = [correct(outputs[i][p]) for p in points]
        first = next((k for k, p in enumerate(scores) if p < READS["threshold"]), -1)
        out.append(
            {{"step_scores": scores, "first_error": first, "steps_scored": len(scores), "truncated": len(scores) < len(steps)}}
        )
    return out
'''


def readme(run: Path, folder: Path, host: Hosting, reads: StepReads) -> str:
    prompt = {
        "template": "the prompt rendered by this folder's chat template with the generation prompt, tokenized "
        "without special tokens (the template writes its own)",
        "plain": f"`head_ids` {reads.head_ids}, then `User: ...\\n\\nAssistant:` (turns joined by a blank line, "
        f"roles System/User/Assistant) tokenized without special tokens, then `mid_ids` {reads.mid_ids}",
        "trl": f"`head_ids` {reads.head_ids} (the BOS), then the prompt's message texts joined by a blank line, "
        "tokenized without special tokens (TRL's PRMTrainer layout)",
    }.get(reads.layout, reads.layout)
    head = "softmax over the 2 outputs, label 1 (correct)" if reads.labels == 2 else "sigmoid of the one output"
    return f"""# {folder.name}: `{run}` (a process reward model) for vLLM {VLLM_VERSION}

Written by `rmspec export {run} --to vllm -o {folder}`. Architecture `{host.architecture}`: vLLM serves it as a
token classifier (`/pooling` with `"task": "token_classify"` answers the head's outputs at every token), as
`rmspec serve {run} --engine vllm` does; rmspec's per-step rewards are those outputs at the step read points
below. Parity with `rmspec score`'s `step_scores` is checked by
`rmspec export {run} --to vllm -o {folder} --overwrite --check --vllm-python PATH` on the run's held-out rows
(float32: every step within 1e-4).

## Start it

```bash
RMSPEC_VLLM_PYTHON=/opt/rmspec-vllm/bin/python ./serve.sh          # 127.0.0.1:8000
python -c 'from prm_client import step_rewards; print(step_rewards([("What is 2 + 3?", ["2 + 3 = 5.", "The answer is 5."])]))'
```

`prm_client.py` (the standard library and transformers' tokenizer; no rmspec) encodes each (prompt, steps) item
as rmspec does, posts the token ids and returns `rmspec score`'s columns: `step_scores` (P(correct) per step),
`first_error` (the first step below the threshold {reads.threshold:g}, -1 for none), `steps_scored`, `truncated`.
Set RMSPEC_VLLM_URL and RMSPEC_VLLM_MODEL for another address or served name.

## Where the step rewards are read (`rmspec_export.json` `steps`)

The token ids are the prompt, then each step followed by the separator {reads.separator!r}:

- prompt: {prompt};
- each step tokenized **on its own** (no special tokens), then `separator_ids` {reads.separator_ids} (the
  separator tokenized alone);
- the **read point** of a step is the index of its separator's last token;
- whole steps are kept from the start while the ids fit {reads.max_length} tokens (the run's `max_length`);
  later steps get no reward.

Send token ids, not text: vLLM tokenizes a text whole (a step's last word may merge with the separator) and adds
the tokenizer's special tokens, which moves the read points.

```bash
curl -s localhost:8000/pooling -H 'Content-Type: application/json' \\
  -d '{{"model": "{folder}", "input": [[IDS]], "task": "token_classify", "use_activation": false}}'
```

`data[0].data[t]` is the head's raw outputs at token `t`; a step's reward is the {head} at its read point.
Per-step rewards are probabilities: no normalisation applies.
"""
