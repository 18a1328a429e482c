"""Calibrate the planner's memory model against PyTorch's FSDPMemTracker (fake tensors, CPU).

Each configuration builds a Hugging Face sequence-classification model from a config under
FakeTensorMode (nothing is allocated), shards it with FSDP2 over a fake process group of N
ranks the way accelerate does (one unit per block plus the root, reshard_after_forward as the
strategy says, bf16 mixed precision policy or plain fp32), runs one warm-up step so the AdamW
states exist, then tracks the peak of one more step (forward, backward, optimizer step).
The prediction is `rmspec.plan.memory.estimate` for the same shape and strategy, without the
fixed framework overhead (CUDA context, which the tracker cannot see).

    python bench/plan_calibration.py            # all configurations -> bench/results/plan_calibration.md
    python bench/plan_calibration.py --one NAME # one configuration as JSON (tests use this)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

GIB = 1024**3
REPO = Path(__file__).resolve().parents[1]

# name -> (HF config kwargs, family, ranks, strategy, pairs per micro batch, seq len, precision, checkpointing, note)
CONFIGS = {
    "llama3-8b-width-4-layers": dict(
        family="llama",
        config=dict(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=4,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
        ),
        ranks=8,
        strategy="fsdp_full_shard",
        pairs=1,
        seq=1024,
        precision="bf16",
        checkpointing=False,
        note="Llama-3-8B widths (h 4096, i 14336, GQA 8, vocab 128256), 4 of 32 blocks",
    ),
    "llama3-8b-width-4-layers-sgo": dict(
        family="llama",
        config=dict(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=4,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
        ),
        ranks=8,
        strategy="fsdp_shard_grad_op",
        pairs=1,
        seq=1024,
        precision="bf16",
        checkpointing=False,
        note="as above, shard-grad-op (reshard_after_forward false)",
    ),
    "llama3-8b-full-depth": dict(
        family="llama",
        config=dict(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
        ),
        ranks=8,
        strategy="fsdp_full_shard",
        pairs=1,
        seq=2048,
        precision="bf16",
        checkpointing=False,
        note="Llama-3-8B, all 32 blocks (bench only: about 25 s)",
        slow=True,
    ),
    "tiny-llama-fp32-ckpt": dict(
        family="llama",
        config=dict(
            hidden_size=512,
            intermediate_size=1376,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=4,
            vocab_size=32000,
        ),
        ranks=2,
        strategy="fsdp_full_shard",
        pairs=4,
        seq=512,
        precision="fp32",
        checkpointing=True,
        note="small Llama, fp32, activation checkpointing",
    ),
    "quickstart-single-fp32": dict(
        family="bert",
        config=dict(
            hidden_size=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=12, vocab_size=30522
        ),
        ranks=1,
        strategy="single",
        pairs=16,
        seq=256,
        precision="fp32",
        checkpointing=False,
        note="the quickstart plan: MiniLM, one process, fp32 (MemTracker, no FSDP)",
    ),
    "tiny-llama-single-bf16-autocast": dict(
        family="llama",
        config=dict(
            hidden_size=1024,
            intermediate_size=2816,
            num_hidden_layers=4,
            num_attention_heads=16,
            num_key_value_heads=4,
            vocab_size=32000,
        ),
        ranks=1,
        strategy="single",
        pairs=4,
        seq=512,
        precision="bf16",
        checkpointing=False,
        note="one device, fp32 weights under bf16 autocast (MemTracker, no FSDP)",
    ),
    "lora-fit-all-linear-dropout": dict(
        family="llama",
        config=dict(
            hidden_size=1024,
            intermediate_size=2816,
            num_hidden_layers=4,
            num_attention_heads=16,
            num_key_value_heads=4,
            vocab_size=32000,
        ),
        ranks=1,
        strategy="single",
        pairs=2,
        seq=256,
        precision="bf16",
        checkpointing=False,
        lora=dict(r=16, dropout=0.05, targets=None),
        real=True,
        note="LoRA r16 all-linear, dropout 0.05, bf16 base (real tensors: PEFT cannot build on fake ones); "
        "one of the runs the LoRA constants were fitted on",
    ),
    "lora-check-qv-other-shape": dict(
        family="llama",
        config=dict(
            hidden_size=512,
            intermediate_size=1408,
            num_hidden_layers=3,
            num_attention_heads=8,
            num_key_value_heads=4,
            vocab_size=16000,
        ),
        ranks=1,
        strategy="single",
        pairs=2,
        seq=128,
        precision="bf16",
        checkpointing=False,
        lora=dict(r=8, dropout=0.1, targets=("q", "v", "down")),
        real=True,
        note="LoRA r8 on q, v, down, dropout 0.1, another shape (not used for fitting)",
    ),
    "tiny-llama-single-packed-fp32": dict(
        family="llama",
        config=dict(
            hidden_size=512,
            intermediate_size=1376,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=4,
            vocab_size=32000,
        ),
        ranks=1,
        strategy="single",
        pairs=2,
        seq=640,
        precision="fp32",
        checkpointing=False,
        packed=True,
        real=True,
        note="shared-prefix rows (prompt 384 + chosen 128 + rejected 128 = 640 tokens per pair, one row each, "
        "4D bool mask, SDPA); real tensors: the mask is built from token ids",
    ),
    "minilm-bert-fp32": dict(
        family="bert",
        config=dict(
            hidden_size=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=12, vocab_size=30522
        ),
        ranks=2,
        strategy="fsdp_full_shard",
        pairs=8,
        seq=256,
        precision="fp32",
        checkpointing=False,
        note="all-MiniLM-L6-v2 shape (BERT encoder), fp32",
    ),
}


def predict(name: str) -> dict:
    from rmspec.plan.memory import TrainingShape, estimate
    from rmspec.plan.model_shape import shape_from_config

    c = CONFIGS[name]
    config = dict(c["config"], model_type=c["family"])
    if c["family"] == "llama":
        config["tie_word_embeddings"] = False
    else:
        config.update(max_position_embeddings=512, type_vocab_size=2)
    shape = shape_from_config(config, name)
    lora = c.get("lora")
    t = TrainingShape(
        micro_batch=c["pairs"],
        seqs_per_example=1 if c.get("packed") else 2,
        seq_len=c["seq"],
        head="score",
        packed=bool(c.get("packed")),
        precision=c["precision"],
        master_fp32=True,
        checkpointing=c["checkpointing"],
        lora_rank=lora["r"] if lora else None,
        lora_targets=lora["targets"] if lora else None,
        lora_dropout=lora["dropout"] if lora else 0.0,
    )
    mem = estimate(shape, t, c["strategy"], num_processes=c["ranks"], gpus_per_node=c["ranks"], nodes=1)
    return {"total": (mem.total - mem.overhead) / GIB, **{k: v for k, v in mem.gb().items() if k != "total"}}


def _frozen_aware_tracker_class():
    from torch.distributed._tools.mem_tracker import MemTracker

    class _NoHook:
        def remove(self) -> None:
            pass

    class FrozenAwareTracker(MemTracker):
        """MemTracker hooks every parameter's gradient; a frozen LoRA base has none to hook."""

        def _track_module_params_and_buffers(self, module, install_grad_hooks=True):
            for param in module.parameters():
                if not param.requires_grad and param not in self._param_to_grad_hook_handles:
                    self._param_to_grad_hook_handles[param] = (_NoHook(), _NoHook())
            return super()._track_module_params_and_buffers(module, install_grad_hooks)

    return FrozenAwareTracker


def track(name: str) -> dict:
    """Peak bytes of one steady-state training step as FSDPMemTracker sees it."""
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    c = CONFIGS[name]
    _FrozenAwareTracker = _frozen_aware_tracker_class()  # noqa: N806
    torch.set_num_threads(2)
    single = c["strategy"] == "single"
    if not single:
        dist.init_process_group("fake", rank=0, world_size=c["ranks"], store=FakeStore())
        mesh = init_device_mesh("cpu", (c["ranks"],))  # outside fake mode: the mesh needs real tensors
    if c["family"] == "llama":
        from transformers import LlamaConfig as Config
        from transformers import LlamaForSequenceClassification as Model

        blocks = lambda m: m.model.layers  # noqa: E731
        extra = dict(tie_word_embeddings=False)
    else:
        from transformers import BertConfig as Config
        from transformers import BertForSequenceClassification as Model

        blocks = lambda m: m.bert.encoder.layer  # noqa: E731
        extra = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config = Config(**c["config"], **extra, num_labels=1, pad_token_id=0, attn_implementation="sdpa")
    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if c["precision"] == "bf16"
        else MixedPrecisionPolicy()
    )
    reshard = c["strategy"] != "fsdp_shard_grad_op"
    lora = c.get("lora")
    with contextlib.nullcontext() if c.get("real") else FakeTensorMode():
        torch.manual_seed(0)
        model = Model(config)
        if lora:
            from peft import LoraConfig, get_peft_model

            names = {
                "q": "q_proj",
                "k": "k_proj",
                "v": "v_proj",
                "o": "o_proj",
                "gate": "gate_proj",
                "up": "up_proj",
                "down": "down_proj",
            }
            targets = "all-linear" if lora["targets"] is None else [names[r] for r in lora["targets"]]
            model = get_peft_model(
                model.to(torch.bfloat16),
                LoraConfig(
                    r=lora["r"],
                    lora_alpha=2 * lora["r"],
                    lora_dropout=lora["dropout"],
                    target_modules=targets,
                    task_type="SEQ_CLS",
                ),
            )
        if c["checkpointing"]:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if not single:
            for block in blocks(model):
                fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard)
            fully_shard(
                model, mesh=mesh, mp_policy=mp, reshard_after_forward=reshard
            )  # accelerate passes it to the root too
        trainable = [p for p in model.parameters() if p.requires_grad]
        optim = torch.optim.AdamW(trainable, lr=1e-5, foreach=True)  # foreach: the GPU default
        ids = torch.randint(1, 1000, (2 * c["pairs"], c["seq"]))  # chosen and rejected in one batch
        autocast = single and c["precision"] == "bf16"  # one device: accelerate's autocast
        rows = None
        if c.get("packed"):  # one shared-prefix row per pair: prompt 3/5 of the row, two responses 1/5 each
            from rmspec.inference.packed_forward import packed_head_outputs
            from rmspec.inference.prefix_mask import Group, pack_groups

            response = c["seq"] // 5
            groups = [
                Group(list(range(1, c["seq"] - 2 * response + 1)), [[7] * response, [9] * response])
                for _ in range(c["pairs"])
            ]
            rows = pack_groups(groups, 0, several_per_row=False)
            ids = rows.input_ids

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                if rows is not None:
                    scores = packed_head_outputs(model, rows)[:, 0].float()
                    scores = torch.stack([scores[0::2], scores[1::2]])
                else:
                    scores = model(input_ids=ids).logits.float()
            chosen, rejected = scores.view(2, -1)
            (-torch.nn.functional.logsigmoid(chosen - rejected)).mean().backward()
            optim.step()
            optim.zero_grad()

        step()  # warm-up: the optimizer states exist from here on, as in every later step
        if single:
            tracker = _FrozenAwareTracker()
            tracker.track_external(model, optim, ids)
        else:
            tracker = FSDPMemTracker(model, optim)
            tracker.track_inputs((ids,))
        with tracker:
            step()
        peak = tracker.get_tracker_snapshot("peak")
    if not single:
        dist.destroy_process_group()
    per_kind = {str(getattr(k, "value", k)): v / GIB for k, v in next(iter(peak.values())).items() if v}
    return {"total": per_kind.pop("Total"), **per_kind}


def run_one(name: str) -> dict:
    start = time.perf_counter()
    tracked = track(name)
    return {"name": name, "tracked": tracked, "predicted": predict(name), "seconds": time.perf_counter() - start}


def run_subprocess(name: str, timeout: int = 600) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one", name],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )
    if out.returncode:
        raise RuntimeError(f"{name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--one")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "plan_calibration.md"))
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return
    rows = [run_subprocess(name) for name in CONFIGS]
    import torch

    lines = [
        "# Planner memory model vs FSDPMemTracker",
        "",
        f"`python bench/plan_calibration.py` (torch {torch.__version__}, fake tensors on CPU, fake process group). "
        "Peak of one steady-state step (after a warm-up step) as PyTorch's FSDPMemTracker tracks it (MemTracker for the one-device rows; real tensors for the LoRA rows, which PEFT cannot build on fake ones), against "
        "`rmspec.plan.memory.estimate` without the fixed CUDA/framework overhead. Bradley-Terry pairs: "
        "2 x pairs sequences per micro batch; SDPA attention; AdamW (foreach).",
        "",
        "| configuration | ranks | strategy | micro batch (pairs) x seq | precision | ckpt | tracked GiB | predicted GiB | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        c = CONFIGS[row["name"]]
        tracked, predicted = row["tracked"]["total"], row["predicted"]["total"]
        lines.append(
            f"| {row['name']} ({c['note']}) | {c['ranks']} | {c['strategy']} | {c['pairs']} x {c['seq']} | "
            f"{c['precision']} | {'on' if c['checkpointing'] else 'off'} | {tracked:.3f} | {predicted:.3f} | "
            f"{(predicted - tracked) / tracked:+.1%} |"
        )
    lines += ["", "Tracked peak by category (GiB):", ""]
    for row in rows:
        parts = ", ".join(f"{k} {v:.3f}" for k, v in row["tracked"].items() if k != "total")
        lines.append(f"- {row['name']}: {parts} ({row['seconds']:.0f} s)")
    lines += ["", "Predicted components (GiB):", ""]
    for row in rows:
        parts = ", ".join(f"{k} {v:.3f}" for k, v in row["predicted"].items() if k != "total")
        lines.append(f"- {row['name']}: {parts}")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
