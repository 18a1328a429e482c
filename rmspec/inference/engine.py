"""The one scoring engine behind `rmspec eval`, `rmspec score`, `rmspec serve` and active selection.

`load_scorer(MODEL_OR_RUN)` loads whatever the run or folder holds: a `RewardEngine` (a reward
model, pointwise or not, or a generative judge) or a process reward model's `StepEngine`
(rmspec.inference.process); `kind` (rmspec.inference.scorer.ScorerKind) says which. A
`RewardEngine` carries everything that decides its scores:
- the layout and chat template the run trained with (a bare model folder: the tokenizer's own);
- `max_length` (the run's `training.max_length`, never past what the model can read);
- the head's output names (`config.id2label`: `reward`, or one per pointwise attribute);
- the normalization (`reward_mean`/`reward_std` that rmspec writes into config.json).

Every caller encodes and scores through it, so a text gets the same score everywhere.
torch/transformers are imported inside the functions.
"""

from __future__ import annotations

from pathlib import Path

from rmspec import approaches
from rmspec.composite.scorer import CompositeScorer
from rmspec.inference.loading import load_reward_model
from rmspec.inference.process import StepEngine, is_token_classifier
from rmspec.inference.scorer import ScorerKind
from rmspec.inference.scorers.reward import RewardEngine as RewardEngine
from rmspec.inference.scorers.reward import preference_probability as preference_probability
from rmspec.inference.target import resolve_target


def load_scorer(
    model_or_run: str | Path,
    *,
    dtype: str = "float32",
    device: str | None = None,
    batch_size: int | None = None,
    step_separator: str | None = None,
) -> RewardEngine | StepEngine | CompositeScorer:
    """The scorer a run directory (its spec decides layout, max_length, approach) or a model folder
    holds: a generative judge or a score-head model (`RewardEngine`), or a process reward model,
    rmspec's or any token classifier (`StepEngine`); dispatch on its `kind`. `step_separator`
    (the CLI's --step-separator): the text after every step for a process reward model, in place of
    the saved one (a PRM saved without it is read with "\\n", TRL's default). A composite run
    (RUN/reward.yaml, rmspec.composite) gives a `CompositeScorer`, its model components loaded here."""
    from rmspec.composite.reward_file import is_composite

    if is_composite(model_or_run):
        from rmspec.composite.scorer import load_composite

        return load_composite(model_or_run, load_model=lambda path: load_scorer(path, dtype=dtype, device=device))
    target = resolve_target(model_or_run)
    spec = target.loaded_spec.spec if target.loaded_spec is not None else None
    scorer = approaches.of(spec).scorer if spec is not None else None  # what the run's approach saved
    is_process = scorer == ScorerKind.PROCESS or is_token_classifier(target.model_dir)
    if step_separator is not None and not is_process:
        from rmspec.errors import RmspecError

        raise RmspecError(
            f"--step-separator is for process reward models; {model_or_run} is not one",
            "leave out --step-separator (it has no effect on a reward model or a judge)",
        )
    if spec is not None and scorer == ScorerKind.JUDGE:
        return RewardEngine.load_judge(target.model_dir, spec, target=target, batch_size=batch_size)
    if is_process:
        return StepEngine.load(
            model_or_run, dtype=dtype, device=device, batch_size=batch_size, separator=step_separator
        )
    model, tokenizer = load_reward_model(target.model_dir, dtype=dtype, device=device)
    return RewardEngine.from_parts(model, tokenizer, spec, target=target, batch_size=batch_size)
