"""Memory per device for one training configuration, broken down by what holds it.

Sources of the formulas (see REFERENCE section 2): model states from the ZeRO paper and
DeepSpeed's own estimators; FSDP full shard behaves like ZeRO-3 and shard-grad-op like
ZeRO-2; activations are counted per saved tensor of one block (calibrated against PyTorch's
FSDPMemTracker in tests/test_plan_calibration.py, table in bench/results/plan_calibration.md).

The peak is phase-aware: weights, optimizer states, buffers and overhead live throughout;
activations (with the forward/backward temporaries) and a full set of gradients (with the
optimizer step's temporaries) peak at different moments, unless gradient accumulation keeps
the gradients alive while the next micro batch runs forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rmspec.plan.blocks import attends_by_blocks, block_mask_bytes
from rmspec.plan.model_shape import ModelShape
from rmspec.plan.optimizer_state import bytes_per_element, state_bytes, vector_state_bytes
from rmspec.vision.shapes import VisionShape, block_bytes_per_patch, saved_bytes_per_patch
from rmspec.vision.vit_shapes import VitShape, vit_block_bytes_per_position, vit_saved_bytes

GIB = 1024**3

STRATEGIES = (
    "single",
    "ddp",
    "fsdp_shard_grad_op",
    "fsdp_full_shard",
    "fsdp_full_shard_offload",
    "fsdp_hybrid_shard",
    "deepspeed_zero2",
    "deepspeed_zero3",
    "deepspeed_zero3_offload",
)
GPU_OVERHEAD_GB = 1.5  # CUDA context, cuBLAS workspace, NCCL buffers
CPU_OVERHEAD_GB = 1.0  # Python, torch and transformers resident in each process
DEEPSPEED_CPU_BUFFER = 1.5  # DeepSpeed's additional_buffer_factor for host memory


@dataclass(frozen=True)
class TrainingShape:
    """What one process computes per micro batch."""

    micro_batch: int  # examples (pairs for bradley_terry) per process per forward
    seqs_per_example: int  # 2 for pairs: chosen and rejected go through in one batch
    seq_len: int
    head: str  # "score" (scalar reward head), "token" (PRM: 2 logits per token, negligible) or "lm" (causal-LM logits)
    # ("score+lm": a score head trained beside the kept LM head, approach.sft_weight)
    precision: str  # bf16 | fp16 | fp32 (compute dtype)
    master_fp32: bool  # fp32 master weights (mixed precision) or weights in the compute dtype
    checkpointing: bool
    attn: str = "sdpa"  # sdpa | flash_attention_2 | eager
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] | None = None  # roles (q, k, v, o, gate, up, down); None = all linear
    grad_accum: int = 1
    fp32_stream: bool = False  # autocast over fp32 weights (single/DDP): the residual stream stays fp32
    lora_dropout: float = 0.0
    packed: bool = False  # shared-prefix rows: seq_len is the row (P + C + R), one per example, plus its 4D mask
    blocks: bool = (
        False  # the packed row attends by blocks (plan.blocks.with_blocks): no whole mask, keys/values not repeated
    )
    # transformers' optim name (rmspec.plan.optimizer_state), sgd_momentum for SGD with momentum
    optimizer: str = "adamw"
    # A VLM's images (rmspec.plan.vision): patches the vision tower encodes per example (0 for text), the
    # largest image's patches (eager attention's score matrices) and which vision parts train.
    vision_patches: int = 0
    vision_image_patches: int = 0
    vision_tower_trained: bool = True
    vision_projector_trained: bool = True
    vision_frozen_parameters: int = 0  # model.vision.freeze: no gradients or optimizer states for these
    vision_tiles: int = 0  # a ViT tower (LLaVA, Gemma 3, Idefics3, ...): tower-size images per example


@dataclass
class MemoryEstimate:
    """Bytes per device by component, and host memory per node for offload."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    temporary: float  # forward/backward: FSDP gathers, autocast weight copies, logits
    buffers: float  # alive throughout: DDP gradient buckets
    step_temporary: float  # optimizer step scratch
    overhead: float
    grads_held: bool  # gradient accumulation keeps gradients during the forward
    cpu_per_node: float = 0.0
    notes: list[str] = field(default_factory=list)
    vision_activations: float = 0.0  # the vision tower's share of `activations` (a VLM's images)

    @property
    def total(self) -> float:
        steady = self.weights + self.optimizer + self.buffers + self.overhead
        fwbw = self.activations + self.temporary + (self.gradients if self.grads_held else 0.0)
        step = self.gradients + self.step_temporary
        return steady + max(fwbw, step)

    def gb(self) -> dict[str, float]:
        out = {
            name: round(getattr(self, name) / GIB, 3)
            for name in (
                "weights",
                "gradients",
                "optimizer",
                "activations",
                "temporary",
                "buffers",
                "step_temporary",
                "overhead",
            )
        }
        out["total"] = round(self.total / GIB, 3)
        return out


# ---------------------------------------------------------------- parameters


def lora_parameters(shape: ModelShape, rank: int, targets: tuple[str, ...] | None) -> int:
    """r * (in + out) for each adapted linear of every block."""
    per_layer = sum(
        rank * (i + o) for role, (i, o) in shape.linear_shapes().items() if targets is None or role in targets
    )
    return per_layer * shape.num_layers


def _bytes(precision: str) -> int:
    return 4 if precision == "fp32" else 2


# ---------------------------------------------------------------- activations


def with_blocks(t: TrainingShape, shape: ModelShape, is_gpu: bool) -> TrainingShape:
    """``t`` with ``blocks`` decided for its row of ``t.seq_len`` columns (plan.blocks.attends_by_blocks)."""
    blocks = attends_by_blocks(t.packed, t.seq_len, is_gpu=is_gpu, sliding_window=shape.sliding_window)
    return replace(t, blocks=blocks)


def layer_activation_bytes_per_token(shape: ModelShape, t: TrainingShape) -> float:
    """Bytes one block saves for backward per token (no checkpointing).

    Counted tensor by tensor for the HF implementations with dropout off:
    decoder (RMSNorm, RoPE, SDPA, SwiGLU): each norm keeps its input upcast to fp32, the normalised
    value before the weight and the weighted output (the next linear's input); rotated q and k
    (RoPE's own products keep only cos and sin, which need no gradient), v, the attention output
    and its log-sum-exp (saved_key_value_bytes_per_token: keys and values repeated to every query
    head where they are); the MLP keeps gate, activation, up and their product (4 x intermediate).
    Checked tensor by tensor against autograd's saved tensors (bench/context_parallel_acceptance.py
    plan --tensors --census; fp32, bf16 and bf16 autocast over fp32 weights, packed and not:
    tests/test_plan_saved_tensors.py).
    encoder (LayerNorm, GELU): q, k, v, attention output, its projection, two norms, and the
    MLP's intermediate before and after GELU.
    Eager attention adds the score and softmax matrices (2 x heads x seq per token).
    """
    e = _bytes(t.precision)
    r = 4 if t.fp32_stream else e  # dtype of the residual stream, norms and RoPE outputs
    h, i, kvd, qd = shape.hidden_size, shape.intermediate_size, shape.kv_dim, shape.q_dim
    if shape.architecture == "decoder":
        if r == e:  # fp32 upcast of the input, the normalised value and the weighted output (the linears' input)
            norms = shape.norms_per_layer * (4 * h + 2 * e * h)
        else:  # autocast over an fp32 stream: fp32 input and normalised value; the weighted output (fp32) is not
            # kept, each linear keeps its own compute-dtype copy of it instead (q, k, v; gate, up)
            norms = shape.norms_per_layer * (4 * h + r * h) + (3 + (2 if shape.gated_mlp else 1)) * e * h
        # rotated q (autocast's compute-dtype copy: the fp32 one is not kept), rotated k and v as attention
        # takes them, the attention output and its fp32 log-sum-exp
        attn = e * qd + saved_key_value_bytes_per_token(shape, t) + e * qd + 4 * shape.num_attention_heads
        mlp = e * (4 * i if shape.gated_mlp else 2 * i)
    else:
        norms = shape.norms_per_layer * (r * h + 4)  # LayerNorm input in the stream's dtype (+ fp32 mean/rstd)
        attn = e * (qd + 2 * kvd) + e * qd + e * h  # q, k, v, attention output, projection
        mlp = e * 2 * i + e * h  # intermediate before/after GELU, projection output
    per_token: float = norms + attn + mlp
    if t.lora_rank:
        per_token = _lora_layer_bytes_per_token(shape, t, e, r)
    if t.attn == "eager" and not t.blocks:  # by blocks the model runs rmspec's attention, which keeps no scores
        per_token += 2 * e * shape.num_attention_heads * t.seq_len
    return float(per_token)


def _attended_kv_dim(shape: ModelShape, t: TrainingShape) -> int:
    """Width of the keys (and values) attention saves per token: repeated to every query head (q_dim) where
    transformers repeats them (repeat_kv): always in eager, and in SDPA whenever a mask is passed, as
    prompt-once rows always pass one (transformers' use_gqa_in_sdpa takes SDPA's own GQA only without a
    mask); the key/value heads' width otherwise, and by blocks (rmspec's attention hands torch's CPU flash kernel
    the key/value heads)."""
    if t.blocks:
        return shape.kv_dim
    return shape.q_dim if t.packed or t.attn == "eager" else shape.kv_dim


def saved_key_value_bytes_per_token(shape: ModelShape, t: TrainingShape) -> float:
    """Bytes per token and decoder layer of the keys (rotated) and values that attention keeps for backward,
    in the compute dtype (under autocast its copies: the fp32 rotated keys are not kept), at the width it
    attends them (_attended_kv_dim)."""
    return float(2 * _bytes(t.precision) * _attended_kv_dim(shape, t))


def _lora_layer_bytes_per_token(shape: ModelShape, t: TrainingShape, e: int, r: int) -> float:
    """A block with a frozen base and LoRA adapters.

    Frozen linears, norm weights and RoPE tables need no saved inputs, so the base keeps less:
    about one compute-dtype copy per norm, SDPA's q, k, v, output and log-sum-exp, and the MLP
    activation's inputs. Each adapter keeps its own copy of its input: the compute dtype plus
    1.1 bytes per element, and with LoRA dropout 4.1 more (the fp32 cast and the mask). The
    constants are fitted with MemTracker on real CPU runs (bench/plan_calibration.py, lora-*).
    """
    h, i, kvd, qd = shape.hidden_size, shape.intermediate_size, shape.kv_dim, shape.q_dim
    if shape.architecture == "decoder":
        base = shape.norms_per_layer * e * h
        base += e * (qd + 2 * kvd) + e * qd + 4 * shape.num_attention_heads
        base += e * (3 * i if shape.gated_mlp else i)
    else:
        base = shape.norms_per_layer * (r * h + 4) + e * (qd + 2 * kvd) + e * qd + e * i
    inputs = sum(
        i_dim for role, (i_dim, _) in shape.linear_shapes().items() if t.lora_targets is None or role in t.lora_targets
    )
    per_element = e + 1.1 + (4.1 if t.lora_dropout > 0 else 0)
    return base + inputs * per_element


def activation_bytes(shape: ModelShape, t: TrainingShape) -> float:
    tokens = t.micro_batch * t.seqs_per_example * t.seq_len
    e = _bytes(t.precision)
    per_layer = layer_activation_bytes_per_token(shape, t)
    # With checkpointing each block keeps only its input; one block at a time is recomputed in full.
    blocks = shape.num_layers * e * shape.hidden_size + per_layer if t.checkpointing else shape.num_layers * per_layer
    # Outside the blocks: the embedding output and the final norm's saved tensors.
    r = 4 if t.fp32_stream else e
    outside = r * shape.hidden_size + (4 + r) * shape.hidden_size
    return tokens * (blocks + outside)


def vision_activation_bytes(shape: ModelShape, t: TrainingShape) -> float:
    """A VLM's vision tower: what its forward keeps for backward over the micro batch's patches
    (rmspec.vision.shapes.saved_bytes_per_patch), plus, with checkpointing, the one block recomputed
    in backward. 0 for text, or where the tower's shape is unknown (families other than Qwen2-VL/2.5-VL)."""
    vit = shape.extra.get("vit_shape")
    if vit and t.vision_tiles and t.vision_tower_trained:  # projector's activations left out (small)
        v_vit, e = VitShape(**vit), _bytes(t.precision)
        recompute = vit_block_bytes_per_position(v_vit, e) * v_vit.positions if t.checkpointing else 0.0
        return t.micro_batch * (vit_saved_bytes(v_vit, t.vision_tiles, e, t.checkpointing) + t.vision_tiles * recompute)
    known = shape.extra.get("vision_shape")
    if not t.vision_patches or not known:
        return 0.0
    v = VisionShape(**known)
    e = _bytes(t.precision)
    eager = t.vision_image_patches if t.attn == "eager" else 0
    trained = {"tower": t.vision_tower_trained, "projector": t.vision_projector_trained}
    per_patch = saved_bytes_per_patch(v, e, checkpointing=t.checkpointing, eager_patches=eager, **trained)
    patches = t.micro_batch * t.vision_patches
    recompute = block_bytes_per_patch(v, e, eager) * patches if t.checkpointing and t.vision_tower_trained else 0.0
    return per_patch * patches + recompute


def logits_bytes(shape: ModelShape, t: TrainingShape) -> float:
    """Causal-LM head only: logits in the compute dtype plus their fp32 upcast for the loss."""
    if t.head == "score+lm":  # the SFT regularizer: LM logits over the chosen sequence only (1 of 2 per pair)
        return t.micro_batch * t.seq_len * shape.vocab_size * (_bytes(t.precision) + 4)
    if t.head != "lm":
        return 0.0
    tokens = t.micro_batch * t.seqs_per_example * t.seq_len
    return tokens * shape.vocab_size * (_bytes(t.precision) + 4)


def packed_mask_bytes(t: TrainingShape) -> float:
    """Shared-prefix rows carry one [rows, 1, seq, seq] float mask in the compute dtype through forward and
    backward, shared by every layer, for SDPA and eager alike (rmspec.inference.prefix_mask.additive_mask); by
    blocks only the partial blocks' masks (plan.blocks.block_mask_bytes)."""
    if not t.packed:
        return 0.0
    if t.blocks:
        return block_mask_bytes(t.micro_batch * t.seqs_per_example, t.seq_len, t.seq_len, _bytes(t.precision))
    return t.micro_batch * t.seqs_per_example * t.seq_len * t.seq_len * _bytes(t.precision)


# ---------------------------------------------------------------- the estimate


def estimate(
    shape: ModelShape,
    t: TrainingShape,
    strategy: str,
    *,
    num_processes: int,
    gpus_per_node: int,
    nodes: int,
    is_gpu: bool = True,
) -> MemoryEstimate:
    """Memory per device (bytes) for `strategy` with `num_processes` data-parallel processes."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    # HSDP shards within a node and replicates across nodes: each process holds 1/gpus_per_node of the state.
    n = gpus_per_node if strategy == "fsdp_hybrid_shard" else num_processes
    e = _bytes(t.precision)
    total = shape.trained_parameters(t.head)
    notes: list[str] = []

    if t.lora_rank:
        trainable = lora_parameters(shape, t.lora_rank, t.lora_targets) + shape.hidden_size
        frozen = total
        frozen_bytes = e  # the frozen base sits in the compute dtype
        w = g = 4  # adapters train in fp32
        opt_total = trainable * bytes_per_element(t.optimizer, w)
    else:
        w = 4 if t.master_fp32 else e
        g = w
        # model.vision.freeze: those parameters stay in the weights' dtype, without gradients or optimizer states
        trainable, frozen, frozen_bytes = total - t.vision_frozen_parameters, t.vision_frozen_parameters, w
        opt_total = state_bytes(shape, t.head, t.optimizer, w)  # AdamW: two moments in the parameter dtype
        opt_total -= frozen * vector_state_bytes(t.optimizer, w)
    unit = shape.largest_unit_parameters()
    layer = shape.layer_parameters()
    layer_trainable = (trainable - shape.hidden_size) // shape.num_layers if t.lora_rank else layer
    root = shape.root_parameters(t.head)
    root_trainable = shape.hidden_size if t.lora_rank else root
    tmp = logits_bytes(shape, t) + packed_mask_bytes(t)
    mixed_autocast = t.master_fp32 and t.precision != "fp32" and not t.lora_rank
    buffers = 0.0
    cpu = 0.0
    sharded = strategy not in ("single", "ddp")
    # Optimizer step scratch: the foreach AdamW on GPUs makes one temporary the size of the parameters.
    step_tmp = trainable * w / (n if sharded else 1)
    weights: float
    grads: float
    opt: float

    if strategy in ("single", "ddp"):
        weights, grads, opt = trainable * w + frozen * frozen_bytes, trainable * g, opt_total
        if mixed_autocast:
            tmp += total * e  # autocast keeps a compute-dtype copy of each weight for backward
        if strategy == "ddp":
            buffers = trainable * g  # reducer buckets hold a copy of the gradients
    elif strategy in ("fsdp_full_shard", "fsdp_shard_grad_op", "fsdp_full_shard_offload", "fsdp_hybrid_shard"):
        weights = (trainable * w + frozen * frozen_bytes) / n
        grads, opt = trainable * g / n, opt_total / n
        # FSDP2, one unit per block plus the root (embeddings, final norm, head). The root is
        # gathered from the start of backward (its output's gradient) to the end (embedding gradient).
        grad_unit = layer_trainable * (e + 4)  # a block's unsharded gradient and its fp32 copy for reduce
        if strategy == "fsdp_shard_grad_op":
            tmp += total * e + grad_unit  # every unit stays gathered between forward and backward
        else:
            tmp += root * e + 2 * layer * e + grad_unit  # root, current and prefetched block gathered
        end_of_backward = root * e + root_trainable * (e + 4)  # root's own gradient, reduced last
        step_tmp = max(step_tmp, end_of_backward)
        if strategy == "fsdp_full_shard_offload":
            cpu = (weights + grads + opt) * gpus_per_node
            weights = grads = opt = 0.0
            step_tmp = end_of_backward  # the optimizer steps on the host
            notes.append("parameters, gradients and optimizer states live in host memory")
    else:  # DeepSpeed, with its own estimators (mixed precision: 2P + 18P/N for ZeRO-2, 4Lp + 18P/N for ZeRO-3)
        per_param = 18 if t.precision != "fp32" else 16
        if strategy == "deepspeed_zero2":
            weights = trainable * e + trainable * 4 / n + frozen * frozen_bytes
            grads = trainable * (per_param - 12) / n
            opt = trainable * 8 / n
        else:
            weights = trainable * (per_param - 12) / n + frozen * frozen_bytes / n
            grads, opt = trainable * 4 / n, trainable * 8 / n
            tmp += 4 * unit  # DeepSpeed: 4 x largest layer for gathered parameters
        if strategy == "deepspeed_zero3_offload":
            cpu = total * max(4 * gpus_per_node, 18 / nodes) * DEEPSPEED_CPU_BUFFER
            weights = grads = opt = 0.0
            step_tmp = 0.0

    # Without FSDP's mixed-precision policy, bf16 comes from autocast over fp32 weights: the residual
    # stream (embeddings, norms, RoPE) stays fp32 and only matmul outputs are bf16.
    activations = activation_bytes(shape, replace(t, fp32_stream=mixed_autocast and strategy in ("single", "ddp")))
    # FSDP checkpoints the wrapped layer class (the language model's blocks), not the vision blocks.
    vision = vision_activation_bytes(
        shape, replace(t, checkpointing=t.checkpointing and not strategy.startswith("fsdp"))
    )
    overhead = (GPU_OVERHEAD_GB if is_gpu else CPU_OVERHEAD_GB) * GIB
    return MemoryEstimate(
        weights=weights,
        gradients=grads,
        optimizer=opt,
        activations=activations + vision,
        temporary=tmp,
        buffers=buffers,
        step_temporary=step_tmp,
        overhead=overhead,
        grads_held=t.grad_accum > 1,
        cpu_per_node=cpu,
        notes=notes,
        vision_activations=vision,
    )
