"""A toy approach from outside rmspec, for tests/test_approach_registry.py: one module (its spec
section, its declaration, its trainer), no file of rmspec touched, registered with one line: an entry
point of the `rmspec.approaches` group (`toy = helpers.toy_approach`, what an installed plugin
declares), RMSPEC_APPROACHES=helpers.toy_approach, or approaches.register(APPROACH) in-process.

It trains on pairs with its own loss: -log sigmoid((r_chosen - r_rejected) / temperature), its one
option; it scores the held-out pairs like Bradley-Terry (the shipped evaluation hook).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from rmspec.approaches.base import SCORE_HEAD, Approach
from rmspec.spec.approach import PAIRS, ApproachSection
from rmspec.spec.scorer_kind import ScorerKind


class ToySection(ApproachSection):
    rows: ClassVar[str] = PAIRS
    kind: Literal["toy"]
    temperature: float = Field(1.0, gt=0, description="Divides the reward difference inside the loss.")


class ToyApproach(Approach):
    name = "toy"
    section = ToySection
    scorer = ScorerKind.REWARD
    head = SCORE_HEAD
    sequences_per_example = 2
    trainer = "helpers.toy_approach:build_trainer"
    evaluation = "rmspec.evaluate.approach_validation:evaluate_pairs"
    validation_metrics = ("accuracy",)
    template = "bradley_terry.yaml"
    demo_data = "demo"

    def config_extra(self, spec: Any) -> dict[str, Any]:
        return {"temperature": spec.approach.temperature}


APPROACH = ToyApproach()


def build_trainer(spec: Any, model: Any, tokenizer: Any, common: dict, packed: bool, validation: Any) -> Any:
    import torch.nn.functional as F

    from rmspec.train.bradley_terry import BradleyTerryTrainer, pair_rewards
    from rmspec.train.collators import PairCollator
    from rmspec.train.losses import pair_metrics

    temperature = spec.approach.temperature

    class ToyTrainer(BradleyTerryTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            chosen, rejected = pair_rewards(model, inputs)
            loss = -F.logsigmoid((chosen - rejected) / temperature).mean()
            if model.training:
                self.record(pair_metrics(chosen, rejected))
            return (loss, {"chosen": chosen, "rejected": rejected, "tie": None}) if return_outputs else loss

    return ToyTrainer(data_collator=PairCollator(tokenizer.pad_token_id), **common)
