"""Model shape without weights: the numbers the memory model needs, and where they came from.

A shape is read, in this order, from the spec's `model.shape` block, from `config.json` of a
local model folder, from the local Hugging Face cache, or from the built-in catalog. The
parameter count is computed from the config (embeddings, attention with GQA, gated or plain
MLP, norms, tied embeddings), so a config file is enough; nothing is downloaded or imported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from rmspec.errors import PlanError
from rmspec.vision.shapes import vision_part_parameters, vision_shape, vision_tower_parameters
from rmspec.vision.vit_shapes import vit_shape

# model_type -> facts a config.json leaves implicit (class defaults in transformers).
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": dict(architecture="decoder", gated_mlp=True, norm="rms", layer_class="LlamaDecoderLayer", tie=False),
    "mistral": dict(architecture="decoder", gated_mlp=True, norm="rms", layer_class="MistralDecoderLayer", tie=False),
    "qwen2": dict(
        architecture="decoder",
        gated_mlp=True,
        norm="rms",
        layer_class="Qwen2DecoderLayer",
        tie=False,
        attention_bias=True,
    ),
    "qwen3": dict(
        architecture="decoder", gated_mlp=True, norm="rms", layer_class="Qwen3DecoderLayer", tie=False, qk_norm=True
    ),
    "gemma": dict(architecture="decoder", gated_mlp=True, norm="rms", layer_class="GemmaDecoderLayer", tie=True),
    "gemma2": dict(
        architecture="decoder",
        gated_mlp=True,
        norm="rms",
        layer_class="Gemma2DecoderLayer",
        tie=True,
        norms_per_layer=4,
    ),
    "phi3": dict(architecture="decoder", gated_mlp=True, norm="rms", layer_class="Phi3DecoderLayer", tie=False),
    "gpt2": dict(
        architecture="decoder",
        gated_mlp=False,
        norm="layer",
        layer_class="GPT2Block",
        tie=True,
        attention_bias=True,
        mlp_bias=True,
        absolute_positions=True,
    ),
    "bert": dict(
        architecture="encoder",
        gated_mlp=False,
        norm="layer",
        layer_class="BertLayer",
        tie=True,
        attention_bias=True,
        mlp_bias=True,
        absolute_positions=True,
        pooler=True,
    ),
    "roberta": dict(
        architecture="encoder",
        gated_mlp=False,
        norm="layer",
        layer_class="RobertaLayer",
        tie=True,
        attention_bias=True,
        mlp_bias=True,
        absolute_positions=True,
        pooler=True,
    ),
    "deberta-v2": dict(
        architecture="encoder",
        gated_mlp=False,
        norm="layer",
        layer_class="DebertaV2Layer",
        tie=True,
        attention_bias=True,
        mlp_bias=True,
        absolute_positions=False,
        pooler=True,
    ),
}


@dataclass(frozen=True)
class ModelShape:
    """Everything the planner knows about a model's size."""

    architecture: str  # decoder | encoder
    model_type: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    layer_class: str | None
    source: str  # where the numbers came from, shown in the plan
    tie_word_embeddings: bool = True
    gated_mlp: bool = True
    norm: str = "rms"  # rms | layer (LayerNorm has a bias: 2h per norm)
    norms_per_layer: int = 2
    attention_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    max_position_embeddings: int = 0  # absolute position table (BERT, GPT-2); 0 for RoPE
    type_vocab_size: int = 0
    relative_position_rows: int = 0  # DeBERTa's shared relative embeddings
    pooler: bool = False
    given_num_parameters: int | None = None  # from model.shape: wins over the computed count
    sliding_window: bool = False  # some layer attends within a window (packed rows keep the masked attention)
    extra: dict = field(default_factory=dict)

    # ------------------------------------------------------------ parameter count
    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def layer_parameters(self) -> int:
        h, i = self.hidden_size, self.intermediate_size
        attn = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        if self.attention_bias:
            attn += self.q_dim + 2 * self.kv_dim
            if self.architecture == "encoder" or self.model_type == "gpt2":
                attn += h  # output projection bias
        if self.qk_norm:
            attn += 2 * self.head_dim
        mlp = (3 if self.gated_mlp else 2) * h * i
        if self.mlp_bias:
            mlp += i + h
        norms = self.norms_per_layer * (2 * h if self.norm == "layer" else h)
        return attn + mlp + norms

    def embedding_parameters(self) -> int:
        h = self.hidden_size
        n = self.vocab_size * h + self.max_position_embeddings * h + self.type_vocab_size * h
        if self.relative_position_rows:
            n += self.relative_position_rows * h + 2 * h
        if self.architecture == "encoder":
            n += 2 * h  # embedding LayerNorm
        return n

    def backbone_parameters(self) -> int:
        """Embeddings, blocks, final norm and pooler: the model without any head."""
        h = self.hidden_size
        n = self.embedding_parameters() + self.num_layers * self.layer_parameters()
        n += self.extra.get("vision_parameters", 0)  # a VLM's vision tower and projector (rmspec.vision.shapes)
        if self.architecture == "decoder":
            n += 2 * h if self.norm == "layer" else h  # final norm
        if self.pooler:
            n += h * h + h
        return n

    def lm_head_parameters(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def num_parameters(self) -> int:
        """The published size: backbone plus the LM head (decoders) when untied."""
        if self.given_num_parameters is not None:
            return self.given_num_parameters
        return self.backbone_parameters() + (self.lm_head_parameters() if self.architecture == "decoder" else 0)

    def trained_parameters(self, head: str) -> int:
        """Parameters of the model as trained: `score` (a scalar head, num_labels wide), `token` (a PRM's
        2-label token classifier: 2h + 2, almost nothing) or `lm` (causal LM)."""
        if self.given_num_parameters is not None:
            base = self.given_num_parameters - (self.lm_head_parameters() if self.architecture == "decoder" else 0)
        else:
            base = self.backbone_parameters()
        if head == "lm":
            return base + self.lm_head_parameters()
        if head == "score+lm":  # approach.sft_weight: the score head and the kept LM head
            return base + self.lm_head_parameters() + self.hidden_size
        if head == "token":  # token classifiers drop BERT's pooler (add_pooling_layer=False)
            pooler = self.hidden_size * self.hidden_size + self.hidden_size if self.pooler else 0
            return base - pooler + 2 * self.hidden_size + 2
        return base + self.hidden_size  # score head: h x 1 (a few more for pointwise attributes)

    def root_parameters(self, head: str) -> int:
        """What FSDP's root unit holds once each block is its own unit: embeddings, final norm, heads.
        Counted from those parts, not as the given total less the blocks: a model.shape's num_parameters
        need not equal the sum of its parts (the parts are estimated), and the difference is not the root's."""
        parts = replace(self, given_num_parameters=None)
        return parts.trained_parameters(head) - self.num_layers * self.layer_parameters()

    def largest_unit_parameters(self) -> int:
        """Largest module gathered at once under full sharding: a block or the embedding table."""
        return max(self.layer_parameters(), self.vocab_size * self.hidden_size)

    def non_embedding_parameters(self) -> int:
        return self.num_layers * self.layer_parameters()

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear in one block, by role, for LoRA counts."""
        h, i = self.hidden_size, self.intermediate_size
        shapes = {
            "q": (h, self.q_dim),
            "k": (h, self.kv_dim),
            "v": (h, self.kv_dim),
            "o": (self.q_dim, h),
            "up": (h, i),
            "down": (i, h),
        }
        if self.gated_mlp:
            shapes["gate"] = (h, i)
        return shapes

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("extra")
        data["num_parameters"] = self.num_parameters
        return data


# ---------------------------------------------------------------- from a config dict


def _first(config: dict, *keys: str, default: Any = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def has_sliding_window(config: dict) -> bool:
    """Whether a config.json's layers attend within a window: its ``layer_types`` where given, else
    ``sliding_window`` unless ``use_sliding_window`` is false (transformers' own reading)."""
    if config.get("layer_types"):
        return "sliding_attention" in config["layer_types"]
    if config.get("use_sliding_window") is False:
        return False
    return bool(config.get("sliding_window"))


def shape_from_config(config: dict, source: str) -> ModelShape:
    """A shape from the keys of a Hugging Face config.json (text config for multimodal ones, plus the
    vision tower's parameters where rmspec.vision.shapes knows the family)."""
    vision = vision_tower_parameters(config)
    extra: dict[str, Any] = {"vision_parameters": vision} if vision else {}
    if isinstance(config.get("vision_config"), dict):  # a VLM: its type decides prompt-once packing
        extra["vision_model_type"] = str(config.get("model_type", ""))
        parts = vision_part_parameters(config)  # the parts model.vision.freeze names (plan.vision_steps.frozen_vision)
        if parts is not None:
            extra["vision_tower_part_parameters"], extra["vision_projector_parameters"] = parts
        tower = vision_shape(config)  # sizes the tower's activations (rmspec.plan.memory)
        if tower is not None:
            extra["vision_shape"] = tower.to_json()
        vit = vit_shape(config)  # LLaVA, Gemma 3, Idefics3, ...: a fixed-size ViT (rmspec.plan.memory)
        if vit is not None:
            extra["vit_shape"] = vit.to_json()
    if isinstance(config.get("text_config"), dict):
        text = config["text_config"]
        config = {**text, "model_type": text.get("model_type", config.get("model_type"))}
    model_type = str(config.get("model_type", "")).lower()
    family = FAMILIES.get(model_type)
    architectures = " ".join(config.get("architectures") or [])
    if family is None:
        # An unknown family with the usual keys: a Llama-like decoder or a BERT-like encoder.
        is_decoder = "CausalLM" in architectures or bool(config.get("is_decoder")) or "num_key_value_heads" in config
        family = FAMILIES["llama" if is_decoder else "bert"] | {"layer_class": None}
    h = _first(config, "hidden_size", "n_embd", "d_model")
    layers = _first(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _first(config, "num_attention_heads", "n_head")
    vocab = _first(config, "vocab_size")
    named = (("hidden_size", h), ("num_hidden_layers", layers), ("num_attention_heads", heads), ("vocab_size", vocab))
    missing = [name for name, value in named if value is None]
    if missing:
        raise PlanError(
            f"{source}: config has no {', '.join(missing)}; cannot size the model",
            hint=SHAPE_HINT,
        )
    kv = _first(config, "num_key_value_heads", default=heads)
    head_dim = _first(config, "head_dim", default=h // heads)
    inter = _first(config, "intermediate_size", "n_inner", default=4 * h)
    tie = config.get("tie_word_embeddings", family["tie"])
    relative = 0
    if model_type == "deberta-v2" and config.get("relative_attention"):
        buckets = config.get("position_buckets", -1)
        span = buckets if buckets and buckets > 0 else config.get("max_relative_positions", -1)
        if not span or span < 1:
            span = config.get("max_position_embeddings", 512)
        relative = 2 * span
    absolute = family.get("absolute_positions", False)
    if model_type == "deberta-v2":
        absolute = bool(config.get("position_biased_input", False))
    layer_class = family.get("layer_class")
    if layer_class is None and architectures:
        layer_class = None  # unknown family: FSDP wraps by size instead
    return ModelShape(
        architecture=family["architecture"],
        model_type=model_type or "unknown",
        hidden_size=int(h),
        num_layers=int(layers),
        num_attention_heads=int(heads),
        num_key_value_heads=int(kv),
        head_dim=int(head_dim),
        intermediate_size=int(inter),
        vocab_size=int(vocab),
        layer_class=layer_class,
        source=source,
        tie_word_embeddings=bool(tie),
        gated_mlp=family["gated_mlp"],
        norm=family["norm"],
        norms_per_layer=family.get("norms_per_layer", 2),
        attention_bias=bool(config.get("attention_bias", family.get("attention_bias", False))),
        mlp_bias=bool(config.get("mlp_bias", family.get("mlp_bias", False))),
        qk_norm=family.get("qk_norm", False),
        max_position_embeddings=int(config.get("max_position_embeddings", 0)) if absolute else 0,
        type_vocab_size=int(config.get("type_vocab_size", 0) or 0),
        relative_position_rows=relative,
        pooler=family.get("pooler", False),
        sliding_window=has_sliding_window(config),
        extra=extra,
    )


def vision_notes(shape: ModelShape) -> list[str]:
    """The plan's line for a VLM: its vision tower is in the weights, gradients and optimizer states."""
    vision = shape.extra.get("vision_parameters")
    if not vision:
        return []
    activations = (
        "its activations from the visual tokens per row (the plan's images line)"
        if shape.extra.get("vision_shape")
        else "its activations on the plan's vision tower line"
        if shape.extra.get("vit_shape")
        else f"its activations are not counted for {shape.extra.get('vision_model_type')} (sized for Qwen2-VL / "
        "Qwen2.5-VL towers only): leave headroom for them"
    )
    return [
        f"vision tower and projector: {vision:,} parameters (from config.json's vision_config), counted in "
        f"the weights, gradients and optimizer states; {activations}"
    ]


SHAPE_HINT = (
    "give the shape in the spec: model.shape: {architecture: decoder, num_parameters: 7.6e9 as an int, "
    "hidden_size, num_layers, num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, "
    "layer_class}, or point model.name_or_path at a local folder with config.json"
)
