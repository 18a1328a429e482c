"""The one scoring engine behind `rmspec eval`, `rmspec score`, `rmspec serve` and active selection,
by the names its callers import.

`load_scorer(MODEL_OR_RUN)` loads whatever the run or folder holds, through the scorer-kind
registry (rmspec.inference.scorers): a `RewardEngine` (a reward model, pointwise or not), a
`JudgeEngine` (a generative judge, rmspec.inference.scorers.judge), a process reward model's
`StepEngine` (rmspec.inference.process) or a `CompositeScorer`; `rmspec.inference.scorers.of(scorer)`
says what it is and does. A `RewardEngine` (rmspec.inference.scorers.reward) carries everything
that decides its scores:
- the layout and chat template the run trained with (a bare model folder: the tokenizer's own);
- `max_length` (the run's `training.max_length`, never past what the model can read);
- the head's output names (`config.id2label`: `reward`, or one per pointwise attribute);
- the normalization (`reward_mean`/`reward_std` that rmspec writes into config.json).

Every caller encodes and scores through it, so a text gets the same score everywhere.
torch/transformers are imported inside the functions.

What computes a reward model's head is an inference engine (rmspec.inference.engine_base): torch on the
loaded model (`TorchEngine`, the default) or vLLM in a process rmspec owns (rmspec.inference.engine_vllm,
attached by `rmspec serve --engine vllm`): `RewardEngine.outputs` calls it with the encoded token ids.
"""

from __future__ import annotations

from rmspec.inference.engine_base import EngineDown, InferenceEngine, TorchEngine
from rmspec.inference.scorers import load as load_scorer
from rmspec.inference.scorers.reward import RewardEngine, preference_probability

__all__ = [
    "EngineDown",
    "InferenceEngine",
    "RewardEngine",
    "TorchEngine",
    "load_scorer",
    "preference_probability",
]
