"""`rmspec export RUN_OR_SPEC --to verl -o DIR` for a judge trained by GRPO (approach generative,
method grpo): the same training for a cluster where verl and Ray already run.

DIR gets
- train.parquet, validation.parquet: verl's RL dataset layout, one row per pair and order
  (data_source, prompt as chat messages, ability, reward_model {style: rule, ground_truth: the
  gold verdict}, extra_info {split, index, pair, order}); the rows are the data stage's, as the run
  reads them (presets, filters, split), laid into the judge prompt as rmspec.train.judge_grpo does;
- compute_score.py: rmspec/train/judge_reward.py as it is, with the spec's rule and verl's
  compute_score(data_source, solution_str, ground_truth, extra_info) appended: exactly the reward
  rmspec trains with;
- train_verl.sh: `python -m verl.trainer.main_ppo ...` with the mapped settings.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError

# approach.grpo.loss_type -> verl's actor.loss_agg_mode (how token losses are averaged)
LOSS_AGG = {
    "grpo": "seq-mean-token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
    "dapo": "token-mean",
    "bnpo": "token-mean",
}


def compute_score_source(rule: Any) -> str:
    """The exported reward file: rmspec's reward module verbatim, then the rule and verl's entry point."""
    from rmspec.train import judge_reward
    from rmspec.train.judge_reward import rule_to_dict

    source = Path(judge_reward.__file__).read_text(encoding="utf-8")
    return (
        source
        + "\n\n# ---- written by `rmspec export --to verl`: the spec's reward rule and verl's entry point\n"
        + f"RULE = RewardRule(**{rule_to_dict(rule)!r})\n"
        + "\n\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
        + '    """verl\'s custom reward function: the verdict reward of one completion."""\n'
        + "    return verdict_reward(solution_str, ground_truth, RULE)\n"
    )


def verl_rows(rows: list[dict[str, Any]], split: str, source: str) -> list[dict[str, Any]]:
    return [
        {
            "data_source": source,
            "prompt": [{"role": "user", "content": r["prompt"]}],
            "ability": "judge",
            "reward_model": {"style": "rule", "ground_truth": r["gold"]},
            "extra_info": {"split": split, "index": i, "pair": r["pair"], "order": r["order"]},
        }
        for i, r in enumerate(rows)
    ]


def verl_command(spec: Any, model_path: str, out: Path) -> list[str]:
    """main_ppo overrides for the spec's settings; verl's batch counts prompts, rmspec's completions."""
    grpo, training = spec.approach.grpo, spec.training
    args = {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": str(grpo.scale_rewards != "none"),
        "data.train_files": str(out / "train.parquet"),
        "data.val_files": str(out / "validation.parquet"),
        "data.prompt_key": "prompt",
        "data.max_prompt_length": training.max_length,
        "data.max_response_length": grpo.max_completion_length,
        "data.train_batch_size": max(1, training.global_batch_size // grpo.num_generations),
        "actor_rollout_ref.model.path": model_path,
        "actor_rollout_ref.actor.optim.lr": training.learning_rate,
        "actor_rollout_ref.actor.ppo_mini_batch_size": max(1, training.global_batch_size // grpo.num_generations),
        "actor_rollout_ref.actor.clip_ratio": grpo.epsilon,
        "actor_rollout_ref.actor.loss_agg_mode": LOSS_AGG[grpo.loss_type],
        "actor_rollout_ref.actor.use_kl_loss": str(grpo.beta > 0),
        "actor_rollout_ref.actor.kl_loss_coef": grpo.beta,
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",  # TRL's k3 estimator
        "actor_rollout_ref.rollout.n": grpo.num_generations,
        "actor_rollout_ref.rollout.temperature": grpo.temperature,
        "actor_rollout_ref.rollout.top_p": grpo.top_p,
        "reward.custom_reward_function.path": str(out / "compute_score.py"),
        "reward.custom_reward_function.name": "compute_score",
        "trainer.seed": training.seed,
    }
    if training.max_steps is not None:
        args["trainer.total_training_steps"] = training.max_steps
    elif training.epochs is not None:
        args["trainer.total_epochs"] = max(1, round(training.epochs))
    return ["python", "-m", "verl.trainer.main_ppo", *(f"{k}={v}" for k, v in args.items())]


def export_judge(target: Path, to: str, out: Path) -> Path:
    """Write DIR for `target` (a run directory or a spec file); returns DIR."""
    import pandas as pd

    from rmspec.data import prepare
    from rmspec.data.chat_template import use_chat_template
    from rmspec.spec import load_spec
    from rmspec.train.judge_grpo import judge_rows, rule_from_spec
    from rmspec.train.modeling import ensure_pad_token, load_tokenizer

    if to != "verl":
        raise RmspecError(f"a GRPO judge exports to verl, not {to}", "use --to verl")
    run = target if target.is_dir() else None
    loaded = load_spec(run / "spec.yaml" if run else target)
    spec = loaded.spec
    if spec.approach.reinforcement is None:  # a judge trained on written verdicts (method: sft)
        raise RmspecError(
            f"{target}: approach {spec.approach.kind} is not trained by GRPO: only a GRPO judge exports its training",
            "set approach.method: grpo, or serve the judge with `rmspec serve RUN`",
        )
    trained = run is not None and (run / "model" / "config.json").is_file()
    model_path = str((run / "model").resolve()) if run is not None and trained else spec.model.name_or_path
    tokenizer = load_tokenizer(model_path, trust_remote_code=spec.model.trust_remote_code)
    use_chat_template(tokenizer, spec.model, loaded.base_dir)
    ensure_pad_token(tokenizer)
    prepared = prepare(loaded, tokenizer, cache_dir=(run / "cache") if run else None)
    out.mkdir(parents=True, exist_ok=True)
    source = f"rmspec/{spec.name}"
    splits = {"train": prepared.train, "validation": prepared.validation}
    for split, data in splits.items():
        rows = judge_rows(data, spec.approach, spec.training.seed) if data is not None and len(data) else []
        pd.DataFrame(verl_rows(rows, split, source)).to_parquet(out / f"{split}.parquet", index=False)
    (out / "compute_score.py").write_text(compute_score_source(rule_from_spec(spec.approach)), encoding="utf-8")
    command = verl_command(spec, model_path, out.resolve())
    script = "#!/usr/bin/env bash\n# written by rmspec export --to verl: the GRPO judge's training in verl\nset -euo pipefail\n"
    script += " ".join(command[:3]) + " \\\n  " + " \\\n  ".join(shlex.quote(c) for c in command[3:]) + "\n"
    (out / "train_verl.sh").write_text(script, encoding="utf-8")
    (out / "train_verl.sh").chmod(0o755)
    return out
