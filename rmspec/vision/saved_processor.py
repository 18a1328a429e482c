"""RUN/model's processor as a Hugging Face folder: `AutoProcessor.from_pretrained(RUN/model,
trust_remote_code=True)` loads it in plain transformers, without rmspec and without torchvision.

The processor a run trains with is the family's class without its video parts (rmspec.vision.processor:
`Qwen2VLProcessor` insists on a video processor, which transformers builds only with torchvision), saved
under the family's name. Plain `AutoProcessor` then asks for a video processor config the folder cannot
have, whatever the base model's processor was (a remote-code or image-only one included). So the folder
also gets that image-and-text class as a few lines of code (PROCESSING_FILE, importing transformers
only) and processor_config.json an `auto_map` naming it, as any remote-code model on the Hub has:
transformers loads it when asked to trust the folder's code. `processor_class` stays the family's, so
where torchvision is installed nothing changes for a caller who does not pass trust_remote_code.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

from rmspec.vision.processor import IMAGE_PARTS

PROCESSING_FILE = "processing_image_text.py"
CLASS_NAME = "ImageTextProcessor"
CONFIG_FILE = "processor_config.json"


def family_class(processor: Any) -> Any:
    """The transformers class the processor is (rmspec's image-only subclass keeps the family's name)."""
    import transformers

    for cls in type(processor).__mro__:
        if getattr(transformers, cls.__name__, None) is cls:
            return cls
    raise ValueError(f"{type(processor).__name__} is not a transformers processor class")


def _default(value: Any) -> str:
    """A parameter's default as source: its literal where it has one, else None (ProcessorMixin reads
    the parameter's name; the family's own default applies when None is given)."""
    if value is inspect.Parameter.empty:
        return "None"
    try:
        text = repr(value)
        ast.literal_eval(text)
        return text
    except (ValueError, SyntaxError):
        return "None"


def processing_source(base: Any) -> str:
    """The module PROCESSING_FILE holds: `base` reading images and text only, its other parts None.

    The parameters are named one by one (transformers reads a processor's parts and settings from its
    __init__'s signature), with the family's defaults."""
    dropped = [part for part in base.get_attributes() if part not in IMAGE_PARTS]
    params = [
        p
        for p in inspect.signature(base.__init__).parameters.values()
        if p.name != "self" and p.name not in dropped and p.kind is p.POSITIONAL_OR_KEYWORD
    ]
    signature = ", ".join(f"{p.name}={_default(p.default)}" for p in params)
    passed = ", ".join([*(f"{p.name}={p.name}" for p in params), *(f"{d}=None" for d in dropped)])
    # SmolVLM's own apply_chat_template reads the video processor's frame settings even for pictures:
    # the generic one (ProcessorMixin's) renders the same conversation without it.
    template = (
        "\n    def apply_chat_template(self, conversation, chat_template=None, **kwargs):\n"
        "        # the family's own reads video settings this class has no video processor for\n"
        "        return ProcessorMixin.apply_chat_template(self, conversation, chat_template, **kwargs)\n"
        if "video_processor" in dropped and "apply_chat_template" in vars(base)
        else ""
    )
    imports = f"from transformers import {base.__name__}" + (", ProcessorMixin" if template else "")
    return (
        f'"""{base.__name__} reading images and text only (written by rmspec beside the weights).\n\n'
        f"transformers' {base.__name__} also wants a video processor, which it builds only with torchvision;\n"
        "this class has the image processor and the tokenizer, as the reward model was trained with. Load it with\n"
        '`AutoProcessor.from_pretrained(folder, trust_remote_code=True)`."""\n\n'
        f"{imports}\n\n\n"
        f"class {CLASS_NAME}({base.__name__}):\n"
        f"    def __init__(self, {signature}, **kwargs):\n"
        f"        super().__init__({passed}, **kwargs)\n" + template
    )


def save_portable(processor: Any, folder: Path) -> None:
    """Save `processor` into `folder` so that AutoProcessor loads it without rmspec (see the module)."""
    processor.save_pretrained(str(folder))
    base = family_class(processor)
    dropped = [part for part in base.get_attributes() if part not in IMAGE_PARTS]
    if not dropped:
        return  # the family's own class reads images and text only: plain AutoProcessor loads it
    (folder / PROCESSING_FILE).write_text(processing_source(base), encoding="utf-8")
    config_path = folder / CONFIG_FILE
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    config.setdefault("processor_class", base.__name__)
    config["auto_map"] = {"AutoProcessor": f"{Path(PROCESSING_FILE).stem}.{CLASS_NAME}"}
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
