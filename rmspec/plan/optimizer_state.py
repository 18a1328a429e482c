"""Optimizer state bytes per optimizer, from the model's parameter tensors (what `optimizer.state` holds
after the first step). Light: no torch.

- AdamW (torch, fused or not) and schedule-free AdamW: two tensors like the parameter (exp_avg and
  exp_avg_sq; schedule-free keeps z and exp_avg_sq);
- bitsandbytes 8-bit AdamW / Lion: one byte per state element plus an fp32 absmax per 256-element block
  and two 256-entry fp32 quantization maps per tensor; tensors under 4096 elements stay 32-bit
  (bitsandbytes' min_8bit_size); 32-bit Lion: one fp32 state;
- Adafactor (transformers', no first moment as the Trainer builds it): a matrix keeps its row and
  column means of the squared gradient (rows + cols), a vector its full second moment;
- SGD: nothing without momentum, one buffer with it.
"""

from __future__ import annotations

from rmspec.plan.model_shape import ModelShape

BNB_BLOCK = 256
BNB_MIN_8BIT = 4096
BNB_QMAPS = 2 * 256 * 4

# What the plan says about each optimizer's state (the memory table's row).
DESCRIPTIONS = {
    "adamw": "AdamW: two moments like the parameters",
    "schedule_free_adamw": "schedule-free AdamW: z and the second moment, like the parameters",
    "adamw_8bit": "8-bit AdamW (bitsandbytes): two 8-bit moments with block scales",
    "lion_32bit": "Lion: one fp32 moment",
    "lion_8bit": "8-bit Lion: one 8-bit moment with block scales",
    "adafactor": "Adafactor: factored second moments (rows + columns of each matrix)",
    "sgd": "SGD without momentum: no state",
    "sgd_momentum": "SGD with momentum: one buffer like the parameters",
}


def family(optim: str) -> str:
    """transformers' optim name -> the state layout above."""
    if optim in ("adamw_torch", "adamw_torch_fused", "adamw"):
        return "adamw"
    return optim


def matrices(shape: ModelShape, head: str) -> list[tuple[int, int]]:
    """(rows, cols) of every trained matrix: block linears, embedding tables, pooler and head."""
    h = shape.hidden_size
    out = [(o, i) for _ in range(shape.num_layers) for i, o in shape.linear_shapes().values()]
    out.append((shape.vocab_size, h))
    for rows in (shape.max_position_embeddings, shape.type_vocab_size, shape.relative_position_rows):
        if rows:
            out.append((rows, h))
    if shape.pooler and head != "token":
        out.append((h, h))
    if head == "lm" and shape.lm_head_parameters():
        out.append((shape.vocab_size, h))
    out.append((2 if head == "token" else 1, h))  # the score / token-classification head
    return out


def vector_state_bytes(optim: str, param_bytes: int) -> float:
    """Optimizer state per element of a parameter state_bytes counts as a vector (a VLM's vision
    parameters among them): what freezing one such parameter saves."""
    kind = family(optim)
    per = {"adamw": 2.0 * param_bytes, "schedule_free_adamw": 2.0 * param_bytes, "sgd": 0.0}
    per |= {"sgd_momentum": float(param_bytes), "adafactor": float(param_bytes), "lion_32bit": 4.0}
    per |= {"adamw_8bit": 8.0, "lion_8bit": 4.0}
    if kind not in per:
        raise ValueError(f"unknown optimizer {optim!r}")
    return per[kind]


def state_bytes(shape: ModelShape, head: str, optim: str, param_bytes: int) -> float:
    """Bytes of optimizer state for the whole trained model (before any sharding)."""
    mats = matrices(shape, head)
    matrix_elements = sum(r * c for r, c in mats)
    total = shape.trained_parameters(head)
    vectors = max(0, total - matrix_elements)  # norms and biases
    kind = family(optim)
    if kind in ("adamw", "schedule_free_adamw"):
        return 2.0 * param_bytes * total
    if kind == "sgd":
        return 0.0
    if kind == "sgd_momentum":
        return float(param_bytes * total)
    if kind == "adafactor":
        return float(param_bytes * (sum(r + c for r, c in mats) + vectors))
    if kind == "lion_32bit":
        return 4.0 * total
    if kind in ("adamw_8bit", "lion_8bit"):
        states = 2 if kind == "adamw_8bit" else 1
        big = [r * c for r, c in mats if r * c >= BNB_MIN_8BIT]
        small = max(0, total - sum(big))
        quantized = sum(states * (n + 4 * -(-n // BNB_BLOCK)) + BNB_QMAPS for n in big)
        return float(quantized + states * 4 * small)
    raise ValueError(f"unknown optimizer {optim!r}")


def bytes_per_element(optim: str, param_bytes: int) -> float:
    """For LoRA adapters (small matrices): the state per trained element, unfactored."""
    kind = family(optim)
    return {
        "adamw": 2.0 * param_bytes,
        "schedule_free_adamw": 2.0 * param_bytes,
        "sgd": 0.0,
        "sgd_momentum": float(param_bytes),
        "adafactor": float(param_bytes),
        "lion_32bit": 4.0,
        "adamw_8bit": 8.0,
        "lion_8bit": 4.0,
    }.get(kind, 2.0 * param_bytes)


def planned_optimizer(training: object) -> str:
    """The state layout the spec's `training:` section trains with."""
    optim = str(getattr(training, "optim_name", "adamw"))
    args = getattr(training, "optimizer_args", {}) or {}
    if optim == "sgd" and float(args.get("momentum", 0) or 0) > 0:
        return "sgd_momentum"
    return family(optim)
