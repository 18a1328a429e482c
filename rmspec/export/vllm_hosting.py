"""Whether vLLM can host a run's scorer as a pooling model, and whether it reads the reward at the token
rmspec reads it: the decision `rmspec export --to vllm` (rmspec.export.vllm) writes its folder from. Refused
with exit 2, naming the architecture and what vLLM hosts: see rmspec.export.vllm's docstring for the list
and the reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError

VLLM_VERSION = "0.32.0"
EXPORT_FILE = "rmspec_export.json"
# Causal LM families vLLM 0.32.0 has a model class for (ModelRegistry.get_supported_archs(), read in
# its CPU build): a `<Family>ForSequenceClassification` checkpoint of these is converted to a pooling
# model automatically (score head read at the last token).
CAUSAL_FAMILIES = frozenset(
    [
        "Bloom",
        "Cohere",
        "Cohere2",
        "DeepseekV2",
        "DeepseekV3",
        "Ernie4_5",
        "Exaone",
        "Exaone4",
        "Falcon",
        "GPTBigCode",
        "GPTJ",
        "GPTNeoX",
        "Gemma",
        "Gemma2",
        "Gemma3",
        "Glm",
        "Glm4",
        "Granite",
        "GraniteMoe",
        "InternLM2",
        "InternLM3",
        "Llama",
        "MiniCPM",
        "Mistral",
        "Mixtral",
        "Nemotron",
        "OPT",
        "Olmo",
        "Olmo2",
        "Olmo3",
        "Phi",
        "Phi3",
        "PhiMoE",
        "Qwen2",
        "Qwen2Moe",
        "Qwen3",
        "Qwen3Moe",
        "SmolLM3",
        "StableLm",
        "Starcoder2",
    ]
)
NATIVE_CLASSIFIERS = frozenset({"GPT2ForSequenceClassification", "JambaForSequenceClassification"})
WHAT_VLLM_HOSTS = (
    "vLLM 0.32 hosts decoder reward models saved as <Family>ForSequenceClassification with one label "
    f"(families: {', '.join(sorted(CAUSAL_FAMILIES))})"
)


@dataclass(frozen=True)
class VisionFamily:
    """How vLLM 0.32 loads one vision-language family as a classifier (read in its source, measured here)."""

    stem: str  # the `<stem>ForConditionalGeneration` class its registry has
    prefixes: tuple[str, ...]  # the checkpoint names that class loads (its hf_to_vllm_mapper, else its modules)
    head: str  # where as_seq_cls_model's `score` head lands among its parameters
    pixel_bounds: bool  # resized by the Qwen2-VL rule within min/max pixels (passed as --mm-processor-kwargs)
    video_processor: bool  # the processor vLLM builds loads a video processor too (one must be named)


# The Qwen2-VL classes' hf_to_vllm_mapper: `model.language_model.`/`model.` to the language model, `model.visual.`
# and `visual.` to the tower. Their converted classifier keeps the head on the language model (vLLM lists
# `language_model.score.weight` and refuses `score.weight`). Idefics3's class has no mapper: its modules are
# the checkpoint's (`model.text_model`, `model.vision_model`, `model.connector`) and the head is the top
# module's own `score` (measured: the tiny Idefics3 of tests/test_export_vllm_idefics3.py loads as saved).
QWEN_PREFIXES = ("model.language_model.", "model.visual.", "model.", "visual.")
# model_type -> its family
VISION_FAMILIES = {
    "qwen2_vl": VisionFamily("Qwen2VL", QWEN_PREFIXES, "language_model.score.", True, True),
    "qwen2_5_vl": VisionFamily("Qwen2_5_VL", QWEN_PREFIXES, "language_model.score.", True, True),
    "idefics3": VisionFamily(
        "Idefics3", ("model.text_model.", "model.vision_model.", "model.connector."), "score.", False, False
    ),
}
WHAT_VLLM_HOSTS_IMAGES = (
    "vLLM 0.32 hosts vision-language reward models of these families as <Stem>ForSequenceClassification with one "
    f"label (its as_seq_cls_model over <Stem>ForConditionalGeneration): {', '.join(sorted(VISION_FAMILIES))}"
)
# Files of the model folder the export copies (weights, config, tokenizer); training leftovers stay.
COPIED_SUFFIXES = (".safetensors", ".json", ".jinja", ".model", ".txt", ".tiktoken")
SKIPPED = {"training_args.bin", "trainer_state.json", EXPORT_FILE, "modules.json"}


@dataclass(frozen=True)
class ReadRule:
    """The token texts that decide where the reward is read (rmspec.inference.read_point, as text)."""

    tail: str  # the layout ends with it; the reward is read at its last token
    tail_prefixes: list[str] = field(default_factory=list)  # proper beginnings of the tail that may be completed
    head: str = ""  # the BOS text vLLM's (exported) tokenizer adds to a text input
    filler: list[str] = field(default_factory=list)  # EOS and pad texts dropped after a complete tail


@dataclass(frozen=True)
class Hosting:
    """What the export decided about one run (written to rmspec_export.json)."""

    architecture: str
    layout: str
    max_length: int
    read: ReadRule
    reward_mean: float | None
    reward_std: float | None
    chat_template: bool
    vllm_version: str = VLLM_VERSION
    # the BOS text the exported tokenizer.json was made to add to a text (verl strips it; rmspec.export.vllm_bos)
    bos_restored: str = ""
    # a vision-language reward model: its family, pixel bounds and image text (rmspec.export.vllm_vision)
    images: dict[str, Any] | None = None


def refuse(run: Path, architecture: str, why: str, hint: str) -> RmspecError:
    return RmspecError(f"{run}: cannot export {architecture} to vLLM: {why}", hint)


def hosting(run: Path, scorer: Any) -> Hosting:
    """Whether vLLM can host this loaded scorer with rmspec's reward, and how; RmspecError (exit 2) if not."""
    architecture = engine_architecture(run, scorer, images=True)
    layout = getattr(scorer.layout, "kind", "?")
    serve_hint = f"serve it with `rmspec serve {run}` (vLLM's /classify protocol, verl's and OpenRLHF's clients)"
    tokenizer = scorer.tokenizer
    if layout != "template":
        raise refuse(
            run,
            architecture,
            f"the run trained on the {layout} layout, not a chat template: verl renders every conversation with the "
            "reward model's chat template (and refuses a tokenizer without one), vLLM renders `messages` with it",
            "train with a chat template (model.chat_template, data.mapping.chat_template: auto), or " + serve_hint,
        )
    return Hosting(
        architecture=architecture,
        layout=layout,
        max_length=int(scorer.max_length),
        read=read_rule(scorer),
        reward_mean=scorer.mean if scorer.can_normalize else None,
        reward_std=scorer.std if scorer.can_normalize else None,
        chat_template=bool(getattr(tokenizer, "chat_template", None)) and layout == "template",
    )


def engine_architecture(run: Path, scorer: Any, per_token: bool = False, images: bool = False) -> str:
    """The architecture vLLM would host this loaded scorer as, reading rmspec's head at the last token of
    the token ids rmspec sends (`rmspec serve --engine vllm`, and the export, which adds its text rules);
    RmspecError (exit 2) naming why not. `per_token`: a process reward model may be hosted too, as a
    `<Family>ForTokenClassification` whose head vLLM computes at every token (token_classify), rmspec
    reading it at the step read points (`rmspec serve --engine vllm`, and the export's process branch:
    rmspec.export.vllm_steps); without it (one reward per sequence: the text export's `hosting`) it is refused.
    `images`: a vision-language reward model may be hosted too (its requests carry the pictures: the export
    and `rmspec serve --engine vllm`, rmspec.export.vllm_vision); without it (token ids only) it is refused."""
    from rmspec.inference import scorers

    kind = scorers.of(scorer)  # what the loaded scorer is (rmspec.inference.scorers)
    model = getattr(scorer, "model", None)
    config = getattr(model, "config", None)
    architecture = (
        ((getattr(config, "architectures", None) or ["?"])[0]) if config is not None else type(scorer).__name__
    )
    serve_hint = f"serve it with `rmspec serve {run}` (vLLM's /classify protocol, verl's and OpenRLHF's clients)"
    if kind.generates:  # a generative judge
        raise refuse(
            run,
            architecture,
            "a generative judge is a text generator; vLLM serves it with its generate runner, not as a pooling reward",
            f"start it with `python -m vllm.entrypoints.openai.api_server --model {run}/model` and call "
            f"/v1/chat/completions from a reward function, or {serve_hint}",
        )
    if kind.per_token and per_token and model is not None:  # a process reward model, for rmspec serve's engine
        family = architecture.removesuffix("ForTokenClassification")
        if architecture.endswith("ForTokenClassification") and family in CAUSAL_FAMILIES:
            return str(architecture)
        raise refuse(
            run,
            architecture,
            "vLLM has no token-classification model for this architecture",
            WHAT_VLLM_HOSTS.replace("ForSequenceClassification with one label", "ForTokenClassification")
            + "; serve it with `rmspec serve` (--engine torch)",
        )
    if kind.per_token:  # a process reward model, asked for one reward per sequence
        raise refuse(
            run,
            architecture,
            "a process reward model gives a reward per step (its token classifier read at each step's "
            "separator), not one per sequence through /classify",
            "export it with `rmspec export RUN --to vllm` (the token-classification folder and its step client), "
            f"or {serve_hint}",
        )
    if kind.reads_images and images and model is not None:  # a vision-language reward model, for the export
        return vision_architecture(run, scorer, str(architecture))
    if kind.reads_images:  # a vision-language reward model where token ids are all vLLM would get
        raise refuse(
            run,
            architecture,
            "a vision-language reward model reads its pictures from image_url parts; token ids carry none",
            f"export it with `rmspec export {run} --to vllm`, or serve it with `rmspec serve {run} --engine vllm` "
            "(both send vLLM the conversations with their pictures)",
        )
    if model is None or config is None:  # a composite reward (rules, judges and models together)
        raise refuse(run, architecture, "a composite reward is not one model", serve_hint)
    labels = list(getattr(scorer, "labels", ["reward"]))
    if not kind.one_score or len(labels) != 1:  # pointwise, or any head with several outputs
        raise refuse(
            run,
            architecture,
            f"a head with {len(labels)} outputs ({', '.join(labels)}); verl reads only probs[-1] of /classify",
            serve_hint,
        )
    layout = getattr(scorer.layout, "kind", "?")
    if layout == "pair":
        raise refuse(
            run,
            architecture,
            "an encoder trained on [CLS] prompt [SEP] response [SEP] with the response as segment 1; vLLM's "
            "/classify reads one text with every segment 0 (a different reward), and verl needs a chat template",
            serve_hint + " (its --segments training gives the trained segment ids)",
        )
    family = architecture.removesuffix("ForSequenceClassification")
    if architecture not in NATIVE_CLASSIFIERS and (
        not architecture.endswith("ForSequenceClassification") or family not in CAUSAL_FAMILIES
    ):
        raise refuse(run, architecture, "vLLM has no pooling model for this architecture", WHAT_VLLM_HOSTS)
    return str(architecture)


def vision_architecture(run: Path, scorer: Any, architecture: str) -> str:
    """The architecture vLLM hosts this vision reward model as; RmspecError (exit 2) where it cannot."""
    config = scorer.model.config
    family = VISION_FAMILIES.get(str(getattr(config, "model_type", "?")))
    labels = list(getattr(scorer, "labels", ["reward"]))
    if family is None:
        raise refuse(
            run,
            architecture,
            f"vLLM has no classifier conversion checked for the {config.model_type} vision-language family",
            WHAT_VLLM_HOSTS_IMAGES + f"; serve it with `rmspec serve {run}` (it takes image_url parts)",
        )
    if architecture != f"{family.stem}ForSequenceClassification" or len(labels) != 1:
        raise refuse(
            run,
            architecture,
            f"expected {family.stem}ForSequenceClassification with one label, found {len(labels)} ({', '.join(labels)})",
            WHAT_VLLM_HOSTS_IMAGES,
        )
    return architecture


def read_rule(scorer: Any) -> ReadRule:
    """rmspec's read point (rmspec.inference.read_point.ReadPoint of the scorer's layout) as texts."""
    from rmspec.inference.read_point import ReadPoint

    tok = scorer.tokenizer
    point = ReadPoint.of(scorer.layout, tok)
    text = lambda ids: tok.decode(list(ids), skip_special_tokens=False)  # noqa: E731
    tail = list(point.tail)
    prefixes = [text(tail[:k]) for k in range(len(tail) - 1, 0, -1)] if tail and tail[0] in point.special else []
    return ReadRule(text(tail), prefixes, text(point.head), sorted({text([t]) for t in point.filler}))


# ---------------------------------------------------------------------- probes: the tokens each client form gives

PROBE_ROWS: list[tuple[list[dict[str, str]], str]] = [
    ([{"role": "user", "content": "What colour is the sky?"}], "Blue, on a clear day."),
    (
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Tell me about rivers."},
            {"role": "assistant", "content": "They flow."},
            {"role": "user", "content": "And then?"},
        ],
        "Into the sea, 2 km later.",
    ),
]


def client_forms(tokenizer: Any, messages: list[dict[str, str]], response: str) -> dict[str, list[int]]:
    """The token ids vLLM reads for one conversation in each client form it is documented for, `tokenizer`
    being the one vLLM loads from the exported folder."""
    from rmspec.export.vllm_bos import verl_text

    chat = [*messages, {"role": "assistant", "content": response}]
    rendered = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
    return {
        "messages": tokenizer(rendered, add_special_tokens=False)["input_ids"],  # vLLM's chat default
        "verl_text": tokenizer(verl_text(tokenizer, rendered), add_special_tokens=True)["input_ids"],  # text default
        "text_no_special": tokenizer(rendered, add_special_tokens=False)["input_ids"],
    }


def probe_rendering(tokenizer: Any) -> str:
    """The first probe conversation as the chat template renders it (where verl's BOS strip is decided)."""
    messages, response = PROBE_ROWS[0]
    chat = [*messages, {"role": "assistant", "content": response}]
    return str(tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=False))


def check_read_point(run: Path, scorer: Any, host: Hosting, tokenizer: Any) -> None:
    """Refuse (exit 2) where vLLM, loading `tokenizer` (the exported one), would read other tokens than rmspec
    for the documented client forms."""
    encoded = scorer.encode(PROBE_ROWS)
    for (messages, response), enc in zip(PROBE_ROWS, encoded):
        for form, ids in client_forms(tokenizer, messages, response).items():
            if list(ids) != list(enc.ids):
                show = tokenizer.decode
                raise refuse(
                    run,
                    host.architecture,
                    f"vLLM would read different tokens than rmspec for a {form} request: rmspec "
                    f"{show(enc.ids[-6:])!r} (ends at token {enc.ids[-1]}), vLLM {show(ids[-6:])!r} "
                    f"({len(ids)} tokens vs {len(enc.ids)}; first tokens: rmspec {show(enc.ids[:3])!r}, "
                    f"vLLM {show(ids[:3])!r})",
                    "the chat template does not render the conversation as rmspec's layout reads it "
                    f"(response located inside the rendering); serve it with `rmspec serve {run}`",
                )
