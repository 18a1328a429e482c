"""A VLM reward model loads every base weight, and its saved form loads in plain transformers.

The source is a tiny Qwen2VLForConditionalGeneration checkpoint (Hub key layout: model.layers.*,
visual.*). Every one of its language and vision tensors must equal the reward model's, compared
tensor by tensor against transformers' own ForConditionalGeneration load of the same files; a
class defined without the conversion mapping (REFERENCE 16, trap 1) must fail that comparison,
which shows the comparison can fail."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from PIL import Image

from rmspec.vision.models import card_snippet, reward_class
from rmspec.vision.tiny import build_processor, build_tiny_generation_vlm

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_tiny_generation_vlm(tmp_path_factory.mktemp("vlm") / "base", seed=3)


def source_tensors(path):
    from transformers import Qwen2VLForConditionalGeneration

    source = Qwen2VLForConditionalGeneration.from_pretrained(path)
    return {k: v for k, v in source.state_dict().items() if k.startswith("model.")}


def mismatched(model, expected) -> list[str]:
    got = model.state_dict()
    return [k for k, v in expected.items() if k not in got or not torch.equal(got[k], v)]


def test_every_language_and_vision_weight_loads(base):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base, num_labels=1)
    expected = source_tensors(base)
    assert any(".visual." in k for k in expected) and any(".language_model." in k for k in expected)
    model = reward_class(config).from_pretrained(base, num_labels=1)
    assert mismatched(model, expected) == []
    assert set(model.state_dict()) == {*expected, "score.weight"}


def test_without_the_conversion_mapping_the_language_model_stays_random(base):
    """The trap the registration avoids: the same class, not registered, loads part at random."""
    from transformers import AutoConfig
    from transformers.modeling_layers import GenericForSequenceClassification
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLPreTrainedModel

    class Unregistered(GenericForSequenceClassification, Qwen2VLPreTrainedModel):
        pass

    config = AutoConfig.from_pretrained(base, num_labels=1)
    model = Unregistered.from_pretrained(base, config=config)
    bad = mismatched(model, source_tensors(base))
    assert any(".language_model." in k for k in bad)


def test_saved_reward_model_loads_in_plain_transformers_by_the_card_snippet(base, tmp_path):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base, num_labels=1)
    model = reward_class(config).from_pretrained(base, num_labels=1).eval()
    with torch.no_grad():
        model.score.weight.normal_()  # a trained head, not zeros
    saved = tmp_path / "rm"
    model.save_pretrained(saved)
    processor = build_processor()
    text = processor.apply_chat_template(
        [
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Colour?"}]},
            {"role": "assistant", "content": "red"},
        ],
        tokenize=False,
    )
    inputs = dict(processor(text=[text], images=[Image.new("RGB", (64, 64), (255, 0, 0))], return_tensors="pt"))
    torch.save(inputs, tmp_path / "inputs.pt")
    with torch.no_grad():
        expected = model(**inputs).logits[0, 0].item()
    # A fresh interpreter that never imports rmspec: the model card's snippet, then one forward.
    script = (
        "import sys; import torch; torch.set_num_threads(1)\n"
        + card_snippet("qwen2_vl", str(saved))
        + f"inputs = torch.load({str(tmp_path / 'inputs.pt')!r})\n"
        + "model.eval()\nprint(repr(model(**inputs).logits[0, 0].item()))\n"
        + "assert 'rmspec' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    assert abs(float(out.stdout.strip().splitlines()[-1]) - expected) < 1e-6
