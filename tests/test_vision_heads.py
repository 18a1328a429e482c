"""ODIN (approach.length_debias) and ensembles (approach.ensemble) train with images on a VLM reward model.

On a tiny Qwen2-VL built offline, with generated pictures:
- the head trainers' loss on one batch equals ODIN's and the ensemble's formulas computed here by
  hand from a plain forward of the same model on the processor's own inputs (pixels and grids), not
  rmspec's collator; ODIN's "length" is the response's text tokens (bytes, for this byte-level
  tokenizer with no merges);
- the rewards the trainers read move with the pictures (a forward that dropped the images would not);
- `rmspec run` of each trains on the image rows and saves a model whose rewards (the run's own
  evaluation and `rmspec score`) equal a plain transformers forward of RUN/model with the images; the
  ensemble's members (ensemble_heads.safetensors) give `rmspec score`'s reward_std.
"""

from __future__ import annotations

import base64
import json
import math

import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from helpers.ci import need
from helpers.pictures import marked_ids
from helpers.runs import rmspec
from rmspec.vision.tiny import build_processor, tiny_config

torch.set_num_threads(1)

IMAGE_PART = "<|vision_start|><|image_pad|><|vision_end|>"
QUESTION = "What colour is the picture?"
# (picture colour, size, chosen, rejected): sizes differ, so the rows have different visual token counts.
ROWS = [
    ((220, 30, 30), (64, 64), "The picture is red.", "It is blue, I think, or maybe a kind of green."),
    ((30, 60, 220), (56, 84), "Blue, clearly a deep blue shade.", "Red."),
    ((30, 180, 40), (84, 56), "The picture is green.", "The picture is yellow, bright yellow."),
    ((235, 220, 40), (64, 64), "Yellow.", "The picture is green or blue."),
]


def prompt(image_text: str) -> str:
    return f"<|im_start|>user\n{image_text}{QUESTION}<|im_end|>\n<|im_start|>assistant\n"


def reply(text: str) -> str:
    return f"{text}<|im_end|>\n"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pictures")
    processor = build_processor(max_pixels=28 * 28 * 16)
    tokenizer = processor.tokenizer
    rows = []
    for k, (colour, size, chosen, rejected) in enumerate(ROWS):
        path = folder / f"{k}.png"
        Image.new("RGB", size, colour).save(path)
        ids = lambda text: marked_ids(tokenizer, text)  # noqa: E731
        rows.append(  # as the data stage writes them: the image's place its picture id (rmspec.vision.marks)
            {
                "chosen": chosen,
                "rejected": rejected,
                "chosen_input_ids": ids(prompt("<image>") + reply(chosen)),
                "rejected_input_ids": ids(prompt("<image>") + reply(rejected)),
                "images": [str(path)],
                "margin": 0.0,
            }
        )
    return folder, processor, rows


def vlm(processor, outputs: int, seed: int = 0):
    from rmspec.vision.models import reward_class

    config = tiny_config(processor.tokenizer)
    config.num_labels = outputs
    torch.manual_seed(seed)
    model = reward_class(config)(config)
    with torch.no_grad():  # heads far from zero, so every term of the losses is at work
        model.score.weight.normal_(0, 0.5)
    return model.train()


def trainer(kind: str, model, processor, rows, tmp_path, packed: bool = False, **options):
    """rmspec's ODIN or ensemble trainer on image pairs: each side with its own copy of the row's images
    (VisionPairCollator), or packed prompt-once (VisionPackedPairCollator: each image once per pair)."""
    from datasets import Dataset
    from transformers import TrainingArguments

    from rmspec.approaches.bradley_terry import LengthDebias
    from rmspec.train.heads import EnsembleTrainer, HeadCollator, OdinTrainer
    from rmspec.train.vision_packing import VisionPackedPairCollator
    from rmspec.vision.collate import VisionEncoder, VisionPairCollator
    from rmspec.vision.processor import image_text

    encoder = VisionEncoder(processor, image_text(model.config, processor))
    base = VisionPackedPairCollator(encoder) if packed else VisionPairCollator(encoder)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True)
    common = dict(model=model, args=args, train_dataset=Dataset.from_list(rows), margin_mode="none")
    if kind == "odin":
        collator = HeadCollator(base, processor.tokenizer)
        return OdinTrainer(odin=LengthDebias(kind="odin", **options), data_collator=collator, **common)
    return EnsembleTrainer(members=model.config.num_labels, data_collator=HeadCollator(base), **common)


def plain_outputs(model, processor, rows) -> tuple[torch.Tensor, torch.Tensor]:
    """Chosen and rejected head outputs [B, K] from the processor's own inputs (text with the image
    part, the pictures decoded here): transformers alone, no rmspec collator."""
    texts = [prompt(IMAGE_PART) + reply(r[side]) for side in ("chosen", "rejected") for r in rows]
    pictures = [Image.open(r["images"][0]).convert("RGB") for r in rows] * 2
    inputs = processor(text=texts, images=pictures, padding=True, padding_side="right", return_tensors="pt")
    assert inputs["pixel_values"].shape[0] > 0 and inputs["image_grid_thw"].shape[0] == 2 * len(rows)
    logits = model(**inputs).logits
    return logits[: len(rows)], logits[len(rows) :]


def pearson(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = x.double(), y.double()
    return ((x - x.mean()) * (y - y.mean())).sum() / math.sqrt(
        ((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum()
    )


def test_odin_loss_with_images_equals_the_formula_by_hand(setup, tmp_path):
    _, processor, rows = setup
    model = vlm(processor, 2)
    lambdas = {"lambda_length": 0.7, "lambda_quality": 1.3, "lambda_ortho": 0.4}
    odin = trainer("odin", model, processor, rows, tmp_path, **lambdas)
    batch = odin.data_collator(rows)
    assert batch["pixel_values"].shape[0] > 0 and batch["image_grid_thw"].shape[0] == 2 * len(rows)
    loss = odin.compute_loss(model, batch)
    with torch.no_grad():
        chosen, rejected = plain_outputs(model, processor, rows)
    # "length" with images: the response's text tokens (one byte, one token here), never its visual tokens
    lengths = torch.tensor([float(len(r[s].encode())) for s in ("chosen", "rejected") for r in rows])
    assert batch["chosen_response_tokens"].tolist() == lengths[: len(rows)].tolist()
    bt = -F.logsigmoid(chosen.sum(1) - rejected.sum(1)).double().mean()
    rho_length = pearson(torch.cat([chosen[:, 1], rejected[:, 1]]), lengths)
    rho_quality = pearson(torch.cat([chosen[:, 0], rejected[:, 0]]), lengths)
    w = model.score.weight.detach().double()
    cos = (w[0] @ w[1]) / (w[0].norm() * w[1].norm())
    by_hand = (
        bt
        + lambdas["lambda_length"] * (1 - rho_length)
        + lambdas["lambda_quality"] * rho_quality.abs()
        + lambdas["lambda_ortho"] * cos.abs()
    )
    assert loss.item() == pytest.approx(by_hand.item(), abs=1e-5)
    # the loss reaches the vision tower: the pictures are trained on
    loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if ".visual." in n and p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)


def test_ensemble_loss_with_images_equals_the_formula_by_hand(setup, tmp_path):
    _, processor, rows = setup
    model = vlm(processor, 3)
    weights = [[2.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 3.0, 0.0], [1.0, 0.0, 2.0]]  # bootstrap counts per row
    weighted = [{**r, "member_weight": w} for r, w in zip(rows, weights)]
    ensemble = trainer("ensemble", model, processor, weighted, tmp_path)
    batch = ensemble.data_collator(weighted)
    loss = ensemble.compute_loss(model, batch)
    with torch.no_grad():
        chosen, rejected = plain_outputs(model, processor, rows)
    per = -F.logsigmoid(chosen - rejected).double()  # [B, members]
    members = [sum(weights[i][m] * per[i, m] for i in range(len(rows))) / len(rows) for m in range(3)]
    assert loss.item() == pytest.approx(sum(members).item() / 3, abs=1e-5)


def test_the_rewards_the_head_trainers_read_move_with_the_pictures(setup, tmp_path):
    """A head forward that dropped the image inputs reads the same rewards whatever the picture."""
    folder, processor, rows = setup
    swapped = []
    for k, r in enumerate(rows):
        path = folder / f"other-{k}.png"
        Image.effect_noise((64, 64), 80).convert("RGB").save(path)
        swapped.append({**r, "images": [str(path)]})
    for kind, outputs in (("odin", 2), ("ensemble", 3)):
        model = vlm(processor, outputs).eval()
        run = trainer(kind, model, processor, rows, tmp_path)
        with torch.no_grad():
            _, first = run.compute_loss(model, run.data_collator(rows), return_outputs=True)
            _, second = run.compute_loss(model, run.data_collator(swapped), return_outputs=True)
            plain_chosen, _ = plain_outputs(model, processor, rows)
        assert torch.allclose(first["chosen"], plain_chosen, atol=1e-5)
        assert (first["chosen"] - second["chosen"]).abs().max() > 1e-3, kind


def test_packed_heads_equal_unpacked_losses_and_gradients(setup, tmp_path):
    """Prompt-once packing (the default for Qwen2-VL) trains ODIN and ensembles as the two-sequence
    layout does: the same loss and every gradient within 1e-5, each image encoded once per pair."""
    _, processor, rows = setup
    weighted = [{**r, "member_weight": [1.0, 2.0, 0.0]} for r in rows]
    for kind, outputs in (("odin", 2), ("ensemble", 3)):
        model = vlm(processor, outputs)
        results = []
        for packed in (False, True):
            run = trainer(kind, model, processor, weighted, tmp_path, packed=packed)
            batch = run.data_collator(weighted)
            assert ("prefix_len" in batch) == packed
            model.zero_grad()
            loss = run.compute_loss(model, batch)
            loss.backward()
            grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
            results.append((loss.item(), grads, batch["pixel_values"].shape[0]))
        (plain_loss, plain_grads, plain_pixels), (packed_loss, packed_grads, packed_pixels) = results
        assert packed_pixels * 2 == plain_pixels  # each image once per pair, not once per side
        assert packed_loss == pytest.approx(plain_loss, abs=1e-5), kind
        assert set(plain_grads) == set(packed_grads) and any(".visual." in n for n in plain_grads)
        for name, grad in plain_grads.items():
            assert torch.allclose(grad, packed_grads[name], atol=1e-5), (kind, name)


def test_a_reward_checkpoint_with_one_output_starts_odin_and_ensembles(tmp_path):
    """The demo's tiny VLM is a reward model (a one-output score head): ODIN's two heads or an ensemble's
    members start fresh on it while every other weight loads (transformers alone refuses the size)."""
    from transformers import AutoConfig

    from rmspec.approaches.bradley_terry import BradleyTerry
    from rmspec.train.modeling import load_model
    from rmspec.vision.models import reward_class
    from rmspec.vision.tiny import build_tiny_vlm

    folder = build_tiny_vlm(tmp_path / "tiny-vlm")
    saved = reward_class(AutoConfig.from_pretrained(folder)).from_pretrained(folder).state_dict()
    for options, outputs in (({"length_debias": {"kind": "odin"}}, 2), ({"ensemble": {"members": 3}}, 3)):
        loaded = load_model(str(folder), BradleyTerry(kind="bradley_terry", **options)).model
        assert loaded.score.weight.shape == (outputs, saved["score.weight"].shape[1])
        state = loaded.state_dict()
        assert state.keys() == saved.keys()
        assert all(torch.equal(state[k], saved[k]) for k in saved if k != "score.weight")
        assert not torch.allclose(state["score.weight"][:1], saved["score.weight"])  # a fresh head


# ---------------------------------------------------------------- end to end

SPEC = """version: 1
name: {name}
model: {{name_or_path: tiny-vlm}}
data:
  source: {{kind: files, paths: [train.jsonl]}}
  mapping: {{preset: pairs}}
  split: {{validation_source: {{kind: files, paths: [heldout.jsonl]}}}}
approach: {approach}
training: {{max_steps: 3, learning_rate: 3.0e-3, global_batch_size: 8, max_length: 128, logging_steps: 1, seed: 0}}
eval: {{validation: true, benchmarks: []}}
hardware: {{device: cpu}}
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from rmspec.vision.demo import write_colour_pairs
    from rmspec.vision.tiny import build_tiny_generation_vlm

    folder = tmp_path_factory.mktemp("heads-run")
    write_colour_pairs(folder, "train", 24, seed=1)
    write_colour_pairs(folder, "heldout", 6, seed=2)
    build_tiny_generation_vlm(folder / "tiny-vlm")  # a base checkpoint (no score head), as a real VLM is
    return folder


def run_and_load(folder, name: str, approach: str, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (folder / f"{name}.yaml").write_text(SPEC.format(name=name, approach=approach))
    done = rmspec("run", f"{name}.yaml", cwd=folder, timeout=600)
    root = folder / "runs" / name
    log = (root / "train.log").read_text() if (root / "train.log").exists() else ""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + log[-3000:]
    return root


def plain_model(saved):
    """RUN/model in plain transformers: its config, weights, tokenizer and image processor."""
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer

    from rmspec.vision.models import reward_class
    from rmspec.vision.tiny import processor_class

    config = AutoConfig.from_pretrained(saved)
    assert config.num_labels == 1
    model = reward_class(config).from_pretrained(saved).eval()
    tokenizer = AutoTokenizer.from_pretrained(saved)
    processor = processor_class()(
        image_processor=AutoImageProcessor.from_pretrained(saved),
        tokenizer=tokenizer,
        chat_template=tokenizer.chat_template,
    )
    return model, processor


def plain_pairs(model, processor, path) -> dict[str, tuple[list[float], list[float]]]:
    """Per pair id: (chosen, rejected) as [reward, hidden state at the last token...] from the processor's
    chat template and the picture (transformers alone)."""
    from rmspec.vision.images import decode_image

    out = {}
    for row in (json.loads(line) for line in path.read_text().splitlines()):
        image = decode_image(row["images"][0], base_dir=path.parent)
        texts = [
            processor.apply_chat_template([*row["prompt"], {"role": "assistant", "content": answer}], tokenize=False)
            for answer in (row["chosen"], row["rejected"])
        ]
        inputs = processor(text=texts, images=[image, image], padding=True, padding_side="right", return_tensors="pt")
        with torch.no_grad():
            result = model(**inputs, output_hidden_states=True)
        last = inputs["attention_mask"].sum(1) - 1
        hidden = result.hidden_states[-1][torch.arange(2), last]
        assert torch.allclose(model.score(hidden)[:, 0], result.logits[:, 0], atol=1e-6)
        out[row["id"]] = (result.logits[:, 0].tolist(), hidden)
    return out


def scored_pairs(root) -> dict[str, tuple[float, float]]:
    rows = map(json.loads, (root / "eval" / "validation.jsonl").read_text().splitlines())
    return {r["id"]: (r["score_chosen"], r["score_rejected"]) for r in rows}


def test_an_odin_run_with_images_saves_the_quality_head(demo, monkeypatch):
    root = run_and_load(demo, "odin", "{kind: bradley_terry, length_debias: {kind: odin}}", monkeypatch)
    metrics = [json.loads(line) for line in (root / "metrics.jsonl").read_text().splitlines()]
    assert any("train/rm/length_head_corr" in m for m in metrics)  # ODIN's terms trained on the image rows
    assert any("eval/rm/quality_length_corr" in m for m in metrics)
    model, processor = plain_model(root / "model")
    plain = plain_pairs(model, processor, demo / "heldout.jsonl")
    scored = scored_pairs(root)
    assert scored.keys() == plain.keys()
    for key, (rewards, _) in plain.items():
        assert scored[key] == pytest.approx(tuple(rewards), abs=1e-5), key
    # the saved head is the trained head's quality row (the last checkpoint keeps both heads)
    from safetensors.torch import load_file

    checkpoint = max((root / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    two = load_file(str(checkpoint / "model.safetensors"))
    wide = next(v for k, v in two.items() if k.endswith("score.weight"))
    assert wide.shape[0] == 2 and torch.allclose(wide[:1], model.score.weight.detach(), atol=1e-7)


def test_an_ensemble_run_with_images_scores_its_members(demo, monkeypatch, tmp_path):
    from safetensors.torch import load_file

    root = run_and_load(demo, "ensemble", "{kind: bradley_terry, ensemble: {members: 3}}", monkeypatch)
    members = load_file(str(root / "model" / "ensemble_heads.safetensors"))["weight"]
    model, processor = plain_model(root / "model")
    assert members.shape[0] == 3 and torch.allclose(members.mean(0), model.score.weight[0].detach(), atol=1e-6)
    assert (members[0] - members[1]).abs().max() > 1e-4  # each member trained on its own resample
    plain = plain_pairs(model, processor, demo / "heldout.jsonl")
    scored = scored_pairs(root)
    for key, (rewards, _) in plain.items():
        assert scored[key] == pytest.approx(tuple(rewards), abs=1e-5), key
    out = tmp_path / "scored.jsonl"
    score = rmspec("score", str(root), str(demo / "heldout.jsonl"), "--out", str(out), cwd=demo)
    assert score.returncode == 0, score.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row, (rewards, hidden) in zip(rows, plain.values()):
        assert (row["reward_chosen"], row["reward_rejected"]) == pytest.approx(tuple(rewards), abs=1e-5)
        spread = (hidden @ members.T).std(dim=1, correction=0)  # the members' rewards, by hand
        assert (row["reward_std_chosen"], row["reward_std_rejected"]) == pytest.approx(spread.tolist(), abs=1e-5)
    served_rewards(root / "model", demo / "heldout.jsonl", plain, members)


def served_rewards(model_dir, path, plain, members) -> None:
    """`rmspec serve`'s vLLM /pooling route with an OpenAI image_url part: the mean reward and the members' std."""
    need("fastapi")
    from fastapi.testclient import TestClient

    from rmspec.inference.engine import load_scorer
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    row = json.loads(path.read_text().splitlines()[0])
    picture = base64.b64encode((path.parent / row["images"][0]).read_bytes()).decode()
    image_url = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{picture}"}}
    content = [image_url if part["type"] == "image" else part for part in row["prompt"][0]["content"]]
    messages = [{"role": "user", "content": content}, {"role": "assistant", "content": row["chosen"]}]
    with TestClient(create_app(Service(load_scorer(model_dir), model_name="m", normalize=False))) as client:
        answer = client.post("/pooling", json={"messages": messages, "use_activation": False})
    assert answer.status_code == 200, answer.text
    item = answer.json()["data"][0]
    rewards, hidden = plain[row["id"]]
    assert item["data"][0] == pytest.approx(rewards[0], abs=1e-5)
    assert item["reward_std"] == pytest.approx(float((hidden[0] @ members.T).std(correction=0)), abs=1e-5)


def test_validate_takes_odin_and_ensembles_with_images_and_refuses_sft_weight_with_the_reason(demo):
    for name, approach in (
        ("v-odin", "{kind: bradley_terry, length_debias: {kind: odin}}"),
        ("v-ens", "{kind: bradley_terry, ensemble: {members: 2}}"),
    ):
        (demo / f"{name}.yaml").write_text(SPEC.format(name=name, approach=approach))
        done = rmspec("validate", f"{name}.yaml", cwd=demo)
        assert done.returncode == 0, done.stdout + done.stderr
    (demo / "v-sft.yaml").write_text(SPEC.format(name="v-sft", approach="{kind: bradley_terry, sft_weight: 0.1}"))
    done = rmspec("validate", "v-sft.yaml", cwd=demo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "sft_weight does not train on images" in done.stderr and "LM head" in done.stderr
    assert "Traceback" not in done.stderr
