"""Field-walker entries for the approach, training, evaluation, output and tracking fields that the core
table (tests/test_every_field_is_read.py) does not reach. Proven by
tests/test_every_field_is_read_recipes.py; the coverage check in the core test reads this table too.

"Class.field" -> (artifact, base, override). base: a spec in the proving module's BASES (one per approach,
on tiny models and data). override: --set items, "a;b" sets a in both specs and b only in the changed one;
"b1 & b2" changes both (an approach's kind only changes with a mapping that fits it: the spec refuses a
mismatch). artifact: plan (plan.json less its echoes) | run (the run body in process on a tiny model, a few
steps: metrics.jsonl, status.json, results.json, the files written, the model's config less the spec values
it copies in, the saved weights, the arguments of from_pretrained and of the hub API) | weights (that run's
saved tensors only: for a field that claims to change what is trained) | trackers (the tracker constructors' arguments) | push (the hub API's
arguments in the run's upload)."""

from __future__ import annotations

PAIRS_MARGIN = "data.mapping.columns={prompt: prompt, chosen: chosen, rejected: rejected, margin: margin}"
PAIRS_TIE = "data.mapping.columns={prompt: prompt, chosen: chosen, rejected: rejected, tie: tie}"
DAVIDSON = PAIRS_TIE + ";approach.ties=davidson"
ODIN = "approach.length_debias={kind: odin}"
BENCH = "eval.benchmarks=[{kind: pairs, path: BENCH, limit: 6}]"
HUB = "output.hub_repo_id=me/model"
STOPPING = "training.eval_steps=1;training.max_steps=5;eval.validation=true;training.learning_rate=1.0e-12;"
TO_PAIRS = " & data.source.paths=[PAIRS] & data.mapping={preset: pairs}"

EFFECTS: dict[str, tuple[str, str, str]] = {
    # sections: a change inside each changes what the plan decided
    "Spec.model": ("plan", "pairs", "model={name_or_path: LLAMA}"),
    "Spec.approach": ("plan", "pairs", "approach={kind: bradley_terry, ensemble: {members: 4}}"),
    "Spec.training": ("plan", "pairs", "training={max_steps: 30}"),
    "Spec.hardware": ("plan", "pairs", "hardware={device: a100-80gb}"),
    "Spec.eval": ("run", "pairs", "eval={validation: true}"),
    "Spec.output": ("run", "pairs", "output={report: [html]}"),
    "Spec.tracking": ("trackers", "pairs", "tracking={backends: [tensorboard]}"),
    # model
    "ModelSpec.revision": ("run", "pairs", "model.revision=v2"),
    "ModelSpec.trust_remote_code": ("run", "pairs", "model.trust_remote_code=true"),
    "ModelSpec.init_from": ("run", "pairs", "model.init_from=STAGE1"),
    "LoraSpec.alpha": ("run", "pairs", "model.lora={r: 4};model.lora.alpha=512"),
    # the decoder's logits over the vocabulary are sized in the plan's memory
    "ModelShape.vocab_size": (
        "plan",
        "pairs",
        "model.shape={architecture: decoder, num_parameters: 150000000, hidden_size: 384, num_layers: 6, "
        "num_attention_heads: 12, intermediate_size: 1536, vocab_size: 30522};model.shape.vocab_size=150000",
    ),
    # approach kinds: each with the data shape it takes, against the pairs base's Bradley-Terry
    "BradleyTerry.kind": ("plan", "lists", "approach={kind: bradley_terry}" + TO_PAIRS),
    "Listwise.kind": (
        "plan",
        "pairs",
        "approach={kind: listwise} & data.source.paths=[LISTS] & data.mapping={preset: ranked}",
    ),
    "Pointwise.kind": ("plan", "scores", "approach={kind: bradley_terry}" + TO_PAIRS),
    "Process.kind": ("plan", "steps", "approach={kind: bradley_terry}" + TO_PAIRS),
    "Generative.kind": ("plan", "judge", "approach={kind: bradley_terry}" + TO_PAIRS),
    # Bradley-Terry
    # a margin column is mapped only with a loss that reads it (the spec refuses it otherwise)
    "BradleyTerry.use_margin": ("run", "pairs", PAIRS_MARGIN + " & approach.use_margin=true"),
    "BradleyTerry.margin": ("run", "pairs", "approach.margin=scale & " + PAIRS_MARGIN),
    "BradleyTerry.margin_map": (
        "run",
        "pairs",
        PAIRS_MARGIN + ";approach.margin=scale;approach.margin_map={1: 1, 2: 3, 3: 10}",
    ),
    "BradleyTerry.ties": ("run", "pairs", PAIRS_TIE + ";approach.ties=davidson"),
    "BradleyTerry.tie_nu": ("run", "pairs", DAVIDSON + ";approach.tie_nu=3.0"),
    "BradleyTerry.tie_learning_rate": ("run", "pairs", DAVIDSON + ";approach.tie_learning_rate=0.5"),
    "BradleyTerry.sft_weight": ("run", "pairs", "model.name_or_path=LLAMA;approach.sft_weight=0.5"),
    "BradleyTerry.center_rewards_coefficient": ("run", "pairs", "approach.center_rewards_coefficient=5.0"),
    "BradleyTerry.length_debias": ("plan", "pairs", ODIN),
    # each lambda weighs a term of the loss: the weights trained differ
    "LengthDebias.lambda_length": ("weights", "pairs", ODIN + ";approach.length_debias.lambda_length=5.0"),
    "LengthDebias.lambda_quality": ("weights", "pairs", ODIN + ";approach.length_debias.lambda_quality=5.0"),
    "LengthDebias.lambda_ortho": ("weights", "pairs", ODIN + ";approach.length_debias.lambda_ortho=5.0"),
    "BradleyTerry.ensemble": ("plan", "pairs", "approach.ensemble={members: 3}"),
    "Ensemble.members": ("plan", "pairs", "approach.ensemble={members: 3};approach.ensemble.members=5"),
    # where it acts: each member's head trains on its own resample (or on every pair), so the heads differ
    "Ensemble.bootstrap": ("weights", "pairs", "approach.ensemble={members: 2};approach.ensemble.bootstrap=false"),
    # listwise, pointwise, process, generative
    "Listwise.top_k": ("run", "lists", "approach.top_k=1"),
    "Listwise.center_rewards_coefficient": ("run", "lists", "approach.center_rewards_coefficient=5.0"),
    "Pointwise.attributes": ("weights", "scores", "approach.attributes=[helpfulness]"),
    # the weights combine the attributes into the reward the validation metrics score
    "Pointwise.weights": ("run", "scores", "eval.validation=true;approach.weights={helpfulness: 1.0, verbosity: -1.0}"),
    "Pointwise.objective": ("weights", "scores", "approach.objective=ordinal"),
    # the ordinal scale sets the classes (and their thresholds) the head is trained on
    "Pointwise.scale": ("weights", "scores", "approach.objective=ordinal;approach.scale={min: 0, max: 6}"),
    "ScoreScale.min": ("weights", "scores", "approach.objective=ordinal;approach.scale.min=-2"),
    "ScoreScale.max": ("weights", "scores", "approach.objective=ordinal;approach.scale.max=6"),
    "Process.step_separator": ("weights", "steps", "approach.step_separator=' w0'"),
    "Process.train_on": ("weights", "steps", "approach.train_on=last_step"),
    # the threshold turns the validation's step scores into predictions
    "Process.threshold": ("run", "steps", "eval.validation=true;approach.threshold=0.2"),
    "Process.tune_threshold": ("run", "steps", "eval.validation=true;approach.tune_threshold=true"),
    "Generative.verdict_pattern": (
        "run",
        "judge",
        "approach.verdict_pattern='(w)[0-9]'",
    ),  # every match reads the same verdict
    "Generative.max_new_tokens": ("run", "judge", "approach.max_new_tokens=2"),
    # training
    "TrainingSpec.decay_ratio": (
        "run",
        "pairs",
        "training.max_steps=5;training.lr_scheduler=warmup_stable_decay;training.decay_ratio=0.9",
    ),
    "TrainingSpec.group_by_length": ("run", "pairs", "training.group_by_length=false"),
    # nothing improves at a learning rate of 1e-12: patience 1 stops at step 2, patience 3 at step 4
    "EarlyStopping.patience": (
        "run",
        "pairs",
        STOPPING + "training.early_stopping={patience: 1};training.early_stopping.patience=3",
    ),
    # evaluation
    "EvalSpec.validation": ("run", "pairs", "eval.validation=true"),
    "EvalSpec.benchmarks": ("run", "pairs", BENCH),
    # the same rows scored by another kind's official rule (RewardBench's sections)
    "Benchmark.kind": (
        "run",
        "pairs",
        "eval.benchmarks=[{kind: pairs, path: RB1}];eval.benchmarks=[{kind: rewardbench, path: RB1}]",
    ),
    "Benchmark.path": ("run", "pairs", BENCH + ";eval.benchmarks=[{kind: pairs, path: BENCH2, limit: 6}]"),
    "Benchmark.preset": (
        "run",
        "pairs",
        BENCH + ";eval.benchmarks=[{kind: pairs, path: BENCH, limit: 6, preset: hh-rlhf}]",
    ),
    "Benchmark.limit": ("run", "pairs", BENCH + ";eval.benchmarks=[{kind: pairs, path: BENCH, limit: 3}]"),
    "Benchmark.split": (
        "run",
        "pairs",
        "eval.benchmarks=[{kind: pairs, path: SPLITS, split: train}];eval.benchmarks=[{kind: pairs, path: SPLITS, split: test}]",
    ),
    # output
    "OutputSpec.report": ("run", "pairs", "output.report=[html]"),
    "OutputSpec.push_to_hub": ("run", "pairs", HUB + ";output.push_to_hub=true"),
    "OutputSpec.hub_repo_id": ("push", "pairs", HUB + ";output.push_to_hub=true;output.hub_repo_id=me/other"),
    "OutputSpec.hub_token_env": ("push", "pairs", HUB + ";output.push_to_hub=true;output.hub_token_env=OTHER_TOKEN"),
    "OutputSpec.private": ("push", "pairs", HUB + ";output.push_to_hub=true;output.private=false"),
    # tracking
    "TrackingSpec.backends": ("trackers", "pairs", "tracking.backends=[tensorboard]"),
    "TrackingSpec.wandb": ("trackers", "pairs", "tracking.backends=[wandb];tracking.wandb={project: p2}"),
    "WandbSpec.project": ("trackers", "pairs", "tracking.backends=[wandb];tracking.wandb.project=p2"),
    "WandbSpec.mode": ("trackers", "pairs", "tracking.backends=[wandb];tracking.wandb.mode=online"),
    "TrackingSpec.mlflow": ("trackers", "pairs", "tracking.backends=[mlflow];tracking.mlflow={experiment: e2}"),
    "MlflowSpec.experiment": ("trackers", "pairs", "tracking.backends=[mlflow];tracking.mlflow.experiment=e2"),
    "MlflowSpec.tracking_uri": (
        "trackers",
        "pairs",
        "tracking.backends=[mlflow];tracking.mlflow.tracking_uri=file:///x",
    ),
    "TrackingSpec.swanlab": ("trackers", "pairs", "tracking.backends=[swanlab];tracking.swanlab={project: p2}"),
    "SwanlabSpec.project": ("trackers", "pairs", "tracking.backends=[swanlab];tracking.swanlab.project=p2"),
    "SwanlabSpec.mode": ("trackers", "pairs", "tracking.backends=[swanlab];tracking.swanlab.mode=local"),
    "TrackingSpec.trackio": ("trackers", "pairs", "tracking.backends=[trackio];tracking.trackio={project: p2}"),
    "TrackioSpec.project": ("trackers", "pairs", "tracking.backends=[trackio];tracking.trackio.project=p2"),
    "TrackioSpec.space_id": ("trackers", "pairs", "tracking.backends=[trackio];tracking.trackio.space_id=me/space"),
}
