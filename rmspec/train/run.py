"""The body of the launched child: data, model, Trainer, final model, status.

Runs in every process the launch starts; only the main process writes the run
directory's shared files (status, data report, metrics, the final model).
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.plan import Plan, read_plan
from rmspec.rundir import (
    RunDir,
    atomic_write_json,
    checkpoint_is_final,
    checkpoint_step,
    last_complete_checkpoint,
    load_run_spec,
    truncate_metrics_after,
    write_status,
)


def uses_cpu(plan: Plan) -> bool:
    return plan.uses_cpu or os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")


def train_run(plan_path: str | Path, *, resume: bool = False) -> int:
    """Train the run whose plan is at ``plan_path``; returns the process exit code."""
    from accelerate import PartialState

    plan_path = Path(plan_path)
    plan = read_plan(plan_path, check_spec=False)  # the run's own copy: its spec is RUN/spec.yaml
    run = RunDir(plan_path.parent)
    # CPU processes join their process group (gloo) only when told they are CPU processes;
    # without it each rank believes it is alone and main, and they race on shared files.
    state = PartialState(cpu=uses_cpu(plan))
    main = state.is_main_process
    from rmspec.train.callbacks import GracefulInterrupt

    lock = own_run_dir(run, state)  # before status.json is touched: it may be another trainer's
    interrupt = GracefulInterrupt().install()
    try:
        if main:
            write_status(
                run,
                "running",
                pid=os.getpid(),
                host=socket.gethostname(),
                started=time.time(),
                resumed=resume,
                world_size=state.num_processes,
                **slurm_job(),
            )
        outcome = _train(run, plan, state, interrupt, resume)
    except KeyboardInterrupt:
        if main:
            write_status(run, "interrupted", error="stopped before a checkpoint could be saved")
        return 130
    except RmspecError as exc:
        if main:
            write_status(run, "failed", error=exc.message, hint=exc.hint, exit_code=exc.exit_code)
        raise
    except Exception as exc:
        if main:
            write_status(run, "failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        raise
    finally:
        interrupt.uninstall()
        if lock is not None:
            lock.release()
    return outcome


def slurm_job() -> dict:
    """The SLURM job this trainer runs in (status.json names it; `rmspec status` asks squeue about it)."""
    if not os.environ.get("SLURM_JOB_ID"):
        return {}
    return {
        "slurm_job_id": os.environ["SLURM_JOB_ID"],
        "slurm_restart_count": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0),
    }


def own_run_dir(run: RunDir, state: Any):
    """Global rank 0 takes the run directory's trainer lock; every rank learns whether it did, so that
    a second trainer (a resume beside a live one, a job submitted twice) stops on all ranks at once."""
    from rmspec.rundir.lock import RunLocked, acquire_trainer_lock

    lock, refusal = None, None
    if state.is_main_process:
        try:
            lock = acquire_trainer_lock(run.root)
        except RunLocked as exc:
            refusal = exc
    if state.num_processes > 1:
        import torch.distributed as dist

        message = [None if refusal is None else (refusal.message, refusal.hint)]
        dist.broadcast_object_list(message, src=0)
        if message[0] is not None and refusal is None:
            refusal = RunLocked(*message[0])
    if refusal is not None:
        raise refusal
    return lock


def _train(run: RunDir, plan: Plan, state: Any, interrupt: Any, resume: bool) -> int:
    from rmspec.data.chat_template import use_chat_template
    from rmspec.train.arguments import build_training_arguments, tracker_env
    from rmspec.train.callbacks import MetricsJsonl, metric_family
    from rmspec.train.factory import build_trainer
    from rmspec.train.modeling import apply_lora, ensure_pad_token, load_model, load_tokenizer
    from rmspec.vision.processor import is_vision_config

    loaded = load_run_spec(run)
    spec = loaded.spec
    main = state.is_main_process
    model_path = plan.model_path
    from rmspec.gguf_source import spec_gguf_source

    gguf = spec_gguf_source(spec.model, loaded.base_dir)
    if gguf is not None:  # a GGUF model: its dequantised copy in plan.model_path, made once here
        from rmspec.inference.gguf_weights import dequantised_model

        with state.main_process_first():  # one process writes the cache folder, the others then read it
            model_path = str(dequantised_model(gguf))

    tokenizer = load_tokenizer(model_path, trust_remote_code=spec.model.trust_remote_code, revision=spec.model.revision)
    use_chat_template(tokenizer, spec.model, loaded.base_dir)  # saved with RUN/model's tokenizer
    ensure_pad_token(tokenizer)
    prepared = prepare_data(loaded, tokenizer, run, state)
    if main:
        atomic_write_json(run.data_report, prepared.report.to_json())

    with state.main_process_first():  # the main process removes half-written checkpoints first
        checkpoint = last_complete_checkpoint(run.checkpoints, remove_partial=True)
    # `rmspec run` starts a fresh run in an empty directory, so a checkpoint here means --resume, a
    # requeued job (SLURM) or a second launch of the same plan: continue, never overwrite.
    if checkpoint is not None or resume:
        if checkpoint is None and main:
            print(f"rmspec: no checkpoint in {run.checkpoints}; starting from the beginning", flush=True)
        if main:
            truncate_metrics_after(run.metrics, checkpoint_step(checkpoint))
            write_status(run, "running", resumed=checkpoint is not None, resumed_from=checkpoint)
    elif main and run.metrics.exists():
        run.metrics.unlink()
    check_rejects(run, spec, prepared.report.to_json(), main)  # into the fresh metrics.jsonl the console follows

    loaded_model = load_model(
        model_path,
        spec.approach,
        seed=spec.training.seed,
        precision=plan.precision,
        attn_implementation=plan.attn_implementation,
        trust_remote_code=spec.model.trust_remote_code,
        revision=spec.model.revision,
        tokenizer=tokenizer,
    )
    model = loaded_model.model
    if spec.model.init_from:  # the two-stage recipe: weights from another run's model
        from rmspec.train.init_from import init_model_from_run

        note = init_model_from_run(model, spec.model.init_from)
        if main:
            print(f"rmspec: {note}", flush=True)
    if spec.model.vision is not None and spec.model.vision.freeze:  # a VLM's image side kept as loaded
        from rmspec.vision.freeze import freeze

        try:
            frozen = freeze(model, spec.model.vision.freeze)
        except ValueError as exc:
            raise RmspecError(str(exc), "remove model.vision.freeze, or train a vision-language model") from None
        if main:
            print(f"rmspec: frozen {', '.join(f'{k} ({v:,} parameters)' for k, v in frozen.items())}", flush=True)
    if spec.model.lora is not None:
        vision = spec.model.vision
        language_only = is_vision_config(model.config) and (vision is None or vision.lora_on == "language_model")
        model = apply_lora(model, spec.model.lora, spec.approach.kind, language_model_only=language_only)

    validation = prepared.validation if prepared.validation is not None and len(prepared.validation) else None
    args = build_training_arguments(
        spec,
        plan,
        run.checkpoints,
        has_validation=validation is not None,
        report_to=tracker_env(spec, run.root),
        use_cpu=uses_cpu(plan) or None,
    )
    family = metric_family(spec.approach.kind)
    trackers = []
    if main and spec.tracking.backends:
        from rmspec.train.trackers import open_trackers

        trackers = open_trackers(spec, plan.to_json(), run.root)
    degree = (plan.context_parallel or {}).get("degree", 1)
    metrics_log = MetricsJsonl(run.metrics, family, trackers, context_parallel=degree)
    callbacks: list = [metrics_log, interrupt]
    early = spec.training.early_stopping
    if early is not None and args.load_best_model_at_end:
        from transformers import EarlyStoppingCallback

        callbacks.append(EarlyStoppingCallback(early_stopping_patience=early.patience))
    trainer = build_trainer(spec, model, tokenizer, args, prepared.train, validation, callbacks, split=degree > 1)
    trainer.decay_ratio = spec.training.decay_ratio
    if plan.context_parallel:  # each row split over a group of ranks (docs/long_context.md)
        from rmspec.train.context_parallel_run import attach

        attach(trainer, model, plan.context_parallel["degree"])
    from rmspec.train.strategy_guard import enforce_plan

    enforce_plan(plan, trainer.accelerator.state)  # before the first step: stop a run that is not its plan
    if checkpoint is not None and checkpoint_is_final(checkpoint):
        # The Trainer resumed at max_steps still trains one step before it checks (a 41st step of a
        # 40-step run): take the checkpoint's weights and state as they are, and finish.
        from transformers.trainer_callback import TrainerState

        final_state = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))
        if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
            # Sharded weights load into the wrapped model, and FSDP2 wraps model and optimizer
            # together (accelerate refuses the model alone, as evaluation would prepare it): the
            # Trainer's own preparation does both, then loads the checkpoint as train() would.
            trainer._prepare_for_training(final_state.max_steps, None, checkpoint)
        else:
            trainer._load_from_checkpoint(checkpoint)
        trainer.state = final_state
        if main:
            print(f"rmspec: {checkpoint} is at max_steps {trainer.state.max_steps}; no step left to train", flush=True)
    else:
        trainer.train(resume_from_checkpoint=checkpoint)

    if interrupt.requested:
        metrics_log.close_trackers()
        if main:
            last = last_complete_checkpoint(run.checkpoints, remove_partial=True)
            write_status(run, "interrupted", step=trainer.state.global_step, checkpoint=last)
        return 0

    from rmspec.train.finish import finish

    try:
        return finish(run, plan, loaded, trainer, tokenizer, prepared, validation, main)
    finally:
        metrics_log.close_trackers()


def check_rejects(run: RunDir, spec: Any, report: dict[str, Any], main: bool) -> None:
    """The rows the data lost, on the run's console (counts by reason, the rejects file); more than
    data.max_rejected fails the run here, before training (every process, so none waits for the rest)."""
    from rmspec.data.report import over_limit, rejects_line
    from rmspec.errors import DataError
    from rmspec.train.finish import stage_notes

    if main:
        stage_notes(run)(rejects_line(report, run.rejects))
    problem = over_limit(report, spec.data.max_rejected)
    if problem is not None:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in (report.get("rejected") or {}).items())
        raise DataError(
            f"data.max_rejected: {problem} ({reasons}); each rejected row and its reason is in {run.rejects}",
            "fix the rows the rejects file names (or the mapping and filters that drop them), or raise "
            "data.max_rejected",
        )


def prepare_data(loaded: Any, tokenizer: Any, run: RunDir, state: Any):
    """rmspec.data.prepare, the main process first (it writes rejects and fills the cache)."""
    from rmspec.data import prepare

    with state.main_process_first():
        return prepare(
            loaded,
            tokenizer,
            rejects_path=run.rejects if state.is_main_process else None,
            cache_dir=run.root / "cache",
        )
