"""The BOS verl strips: given back by the exported tokenizer, so vLLM reads the tokens rmspec reads.

verl 0.9 renders the conversation with the reward model's chat template and strips the tokenizer's BOS
text from its start before posting it to vLLM's `/classify` (verl/experimental/reward_loop/reward_loop.py,
`_preprocess_reward_inputs`: "llama tokenizer will add bos token by default"), counting on vLLM's tokenizer
to add the BOS back (vLLM's text default, `add_special_tokens: true`). Llama-3's tokenizer does. A tokenizer
that names as its BOS a token its chat template writes but adds nothing to a text (SmolLM2: `<|im_start|>`,
the first token of every ChatML turn) loses the conversation's first token that way, and vLLM reads a
different reward.

The export gives the BOS back where it is lost: the exported `tokenizer.json` gets a post-processor that
puts the BOS in front of a text when special tokens are added (the place Llama-3's fast tokenizer adds its
BOS; transformers 5.x's TokenizersBackend reads no `add_bos_token` flag, measured with 5.19 and 5.23).
The chat path (`messages`, rendered with `add_special_tokens: false`) and a text sent with
`add_special_tokens: false` do not run the post-processor, so they keep reading the template's own
tokens; the rendered text sent with its BOS and vLLM's default special tokens then gets two, the same
documented trap as Llama-3's. The rewritten tokenizer is loaded and probed (rmspec.export.vllm_hosting.
check_read_point) before anything is written; where it cannot be built, the export refuses with this reason.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError

TOKENIZER_FILE = "tokenizer.json"
# the files AutoTokenizer reads from a fast tokenizer's folder (copied with the rewritten tokenizer.json to load it)
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "added_tokens.json")
VERL_SOURCE = "verl 0.9's reward loop (reward_loop.py, _preprocess_reward_inputs)"


def verl_text(tokenizer: Any, rendered: str) -> str:
    """The text verl 0.9 posts to vLLM: the chat template's rendering without the tokenizer's BOS text at its
    start (VERL_SOURCE: stripped whenever the rendering starts with it, whatever the tokenizer adds back)."""
    bos = tokenizer.bos_token
    return rendered[len(bos) :] if bos is not None and rendered.startswith(bos) else rendered


def lost_bos(tokenizer: Any, rendered: str) -> str:
    """The BOS text verl strips from `rendered` and this tokenizer does not add back to a text, or ""."""
    bos, bos_id = tokenizer.bos_token, tokenizer.bos_token_id
    if bos is None or bos_id is None or verl_text(tokenizer, rendered) == rendered:
        return ""
    return "" if tokenizer("a", add_special_tokens=True)["input_ids"][:1] == [bos_id] else bos


def with_bos(spec: dict[str, Any], bos: str, bos_id: int) -> dict[str, Any]:
    """`tokenizer.json` (parsed) whose post-processor puts `bos` in front of each text when special tokens are
    added; ValueError naming what stops it."""
    token = {"SpecialToken": {"id": bos, "type_id": 0}}
    template: dict[str, Any] = {
        "type": "TemplateProcessing",
        "single": [token, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [token, {"Sequence": {"id": "A", "type_id": 0}}, token, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }
    old = spec.get("post_processor")
    if old is None:
        new = template
    elif old.get("type") == "TemplateProcessing":  # prepend the BOS to what it already adds
        new = dict(old)
        new["single"] = [token, *old["single"]]
        pair = [dict(p) for p in old["pair"]]
        second = next((i for i, p in enumerate(pair) if p.get("Sequence", {}).get("id") == "B"), None)
        if second is None:
            raise ValueError("its post-processor's pair template has no second sequence")
        pair.insert(second, {"SpecialToken": {"id": bos, "type_id": 1}})
        new["pair"] = [token, *pair]
        new["special_tokens"] = {**old.get("special_tokens", {}), bos: template["special_tokens"][bos]}
    elif old.get("type") == "Sequence":
        new = {"type": "Sequence", "processors": [*old["processors"], template]}
    else:  # ByteLevel, RobertaProcessing, ...: run it, then add the BOS
        new = {"type": "Sequence", "processors": [old, template]}
    return {**spec, "post_processor": new}


def refuse_lost_bos(run: Path, architecture: str, bos: str, why: str) -> RmspecError:
    return RmspecError(
        f"{run}: cannot export {architecture} to vLLM: the tokenizer's BOS text {bos!r} is the first token of the "
        f"chat template's rendering; {VERL_SOURCE} strips it, expecting vLLM's tokenizer to add it back, and this "
        f"tokenizer adds none to a text; the export could not make it add one ({why})",
        f"serve it with `rmspec serve {run}` (verl's and OpenRLHF's clients), or send vLLM the conversation as chat "
        "`messages`, or the rendered text with `add_special_tokens: false`",
    )


def restore_bos(run: Path, architecture: str, model_dir: Path, tokenizer: Any, rendered: str) -> tuple[str, str, Any]:
    """(BOS text given back, the rewritten tokenizer.json text, the tokenizer vLLM will load) where verl's
    strip loses the BOS; ("", "", tokenizer) where nothing is lost. RmspecError (exit 2) where it cannot be
    given back."""
    bos = lost_bos(tokenizer, rendered)
    if not bos:
        return "", "", tokenizer
    source = model_dir / TOKENIZER_FILE
    if not source.is_file():
        raise refuse_lost_bos(run, architecture, bos, f"the run saved no {TOKENIZER_FILE}")
    try:
        text = json.dumps(
            with_bos(json.loads(source.read_text()), bos, int(tokenizer.bos_token_id)), ensure_ascii=False
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise refuse_lost_bos(run, architecture, bos, f"{TOKENIZER_FILE}: {exc}") from None
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="rmspec-bos-") as tmp:
        for name in TOKENIZER_FILES:
            if (model_dir / name).is_file():
                shutil.copy2(model_dir / name, Path(tmp) / name)
        (Path(tmp) / TOKENIZER_FILE).write_text(text)
        try:
            fixed = AutoTokenizer.from_pretrained(tmp)
        except Exception as exc:  # the tokenizers library raises plain Exception on a post-processor it cannot read
            raise refuse_lost_bos(run, architecture, bos, f"transformers cannot load it rewritten: {exc}") from None
    if lost_bos(fixed, rendered):
        raise refuse_lost_bos(run, architecture, bos, "the rewritten tokenizer still adds no BOS to a text")
    return bos, text, fixed
