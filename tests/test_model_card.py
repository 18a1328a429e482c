"""The model card's usage snippet loads the saved model with the class it was saved as."""

from __future__ import annotations

import pytest

from rmspec.train.final_model import model_card


@pytest.mark.parametrize(
    "scorer, loads, not_loads",
    [
        ("reward", "AutoModelForSequenceClassification.from_pretrained", "AutoModelForCausalLM"),
        ("judge", "AutoModelForCausalLM.from_pretrained", "AutoModelForSequenceClassification.from_pretrained"),
        ("process", "AutoModelForTokenClassification", "AutoModelForSequenceClassification.from_pretrained"),
    ],
)
def test_the_usage_snippet_matches_the_saved_model(scorer, loads, not_loads):
    from huggingface_hub import ModelCard

    card = model_card(
        name="m",
        approach="x",
        base_model="org/base",
        spec_yaml="name: m\n",
        data_summary=None,
        results={},
        scorer=scorer,
    )
    assert loads in card and not_loads not in card
    assert ModelCard(card).data.library_name == "transformers"  # the front matter still parses
