"""A vision-language generative judge (approach kind generative, method sft), as LLaVA-Critic trains
one: a tiny Qwen2-VL *ForConditionalGeneration (built offline) learns to write the verdict of a judge
prompt whose user turn holds the pair's picture. Checked against plain transformers, not rmspec's
collator: the training loss is the cross-entropy of the verdict turn under a plain forward of the
processor's own chat template and images; the run's held-out verdicts (both orders) and `rmspec score`'s
are a plain greedy generate of RUN/model alone with the images; the images reach the model (the
judge's logits differ for a different picture)."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from helpers.runs import rmspec
from rmspec.approaches.generative import JUDGE_INSTRUCTION
from rmspec.inference.judge import parse_verdict

COLOURS = {"red": (220, 30, 30), "green": (30, 180, 40), "blue": (30, 60, 220), "yellow": (235, 220, 40)}
QUESTION = "What colour is the picture?"

SPEC = """\
version: 1
name: vl-judge
model: {{name_or_path: tiny-judge}}
data:
  source: {{kind: files, paths: [train.jsonl]}}
  mapping: {{preset: messages}}
  split: {{validation_source: {{kind: files, paths: [heldout.jsonl]}}}}
approach: {{kind: generative, max_new_tokens: 6{method}}}
training: {{max_steps: {steps}, learning_rate: 1.0e-2, global_batch_size: 8, max_length: 1024, logging_steps: 20, seed: 0}}
hardware: {{device: cpu}}
"""


def parts(a: str, b: str) -> list[dict[str, str]]:
    """The judge's user turn, written by hand in the layout of docs/approaches (the picture in [Prompt])."""
    tail = f"{QUESTION}\n\n[Response A]\nThe picture is {a}.\n\n[Response B]\nThe picture is {b}."
    return [
        {"type": "text", "text": JUDGE_INSTRUCTION + "\n\n[Prompt]\n"},
        {"type": "image"},
        {"type": "text", "text": tail},
    ]


def write_judge_data(folder: Path, name: str, n: int, seed: int) -> list[dict]:
    """`folder/name.jsonl`: judge conversations (the picture in the user turn, the verdict as the reply)."""
    from PIL import Image

    rng = random.Random(seed)
    (folder / name).mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        colour = rng.choice(sorted(COLOURS))
        wrong = rng.choice([c for c in sorted(COLOURS) if c != colour])
        first = rng.random() < 0.5
        a, b = (colour, wrong) if first else (wrong, colour)
        Image.new("RGB", (64, 64), COLOURS[colour]).save(folder / name / f"{i}.png")
        rows.append(
            {
                "id": f"{name}-{i}",
                "messages": [
                    {"role": "user", "content": parts(a, b)},
                    {"role": "assistant", "content": "[[A]]" if first else "[[B]]"},
                ],
                "images": [f"{name}/{i}.png"],
                "a": a,
                "b": b,
            }
        )
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


@pytest.fixture(scope="module")
def judge_folder(tmp_path_factory) -> Path:
    from rmspec.vision.tiny import build_tiny_generation_vlm

    folder = tmp_path_factory.mktemp("vl-judge")
    write_judge_data(folder, "train", 48, seed=1)
    write_judge_data(folder, "heldout", 6, seed=2)
    build_tiny_generation_vlm(folder / "tiny-judge", seed=0)
    return folder


def plain_parts(model_dir: Path):
    """RUN/model (or the base judge) in plain transformers, as its model card says: the model, its tokenizer
    and a processor of its saved image processor with the tokenizer's chat template."""
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

    from rmspec.vision.tiny import processor_class

    model = AutoModelForImageTextToText.from_pretrained(model_dir).eval()
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    processor = processor_class()(
        image_processor=AutoImageProcessor.from_pretrained(model_dir),
        tokenizer=tokenizer,
        chat_template=tokenizer.chat_template,
    )
    return model, processor


def image_of(folder: Path, ref: str):
    from PIL import Image

    return Image.open(folder / ref).convert("RGB")


def plain_inputs(processor, content, image, *, generation: bool, reply: str | None = None):
    messages = [{"role": "user", "content": content}]
    if reply is not None:
        messages.append({"role": "assistant", "content": reply})
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
    return text, processor(text=[text], images=[image], return_tensors="pt")


def test_the_loss_is_the_cross_entropy_of_the_verdict_under_a_plain_forward(judge_folder, tmp_path):
    from rmspec.data.pipeline import prepare
    from rmspec.spec import load_spec
    from rmspec.train.arguments import build_training_arguments
    from rmspec.train.factory import build_trainer
    from rmspec.train.modeling import load_model

    torch.set_num_threads(1)
    (judge_folder / "loss.yaml").write_text(SPEC.format(method="", steps=1), encoding="utf-8")
    loaded = load_spec(judge_folder / "loss.yaml")
    spec = loaded.spec
    model_path = str(judge_folder / "tiny-judge")
    built = load_model(model_path, spec.approach)
    model, tokenizer = built.model.eval(), built.tokenizer
    prepared = prepare(loaded, tokenizer, cache_dir=tmp_path / "cache")
    args = build_training_arguments(spec, None, tmp_path / "ckpt", has_validation=True, use_cpu=True)
    trainer = build_trainer(spec, model, tokenizer, args, prepared.train, prepared.validation)
    rows = [prepared.train[i] for i in range(3)]
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model, trainer.data_collator(rows)).item()

    # By hand: each row's conversation through the processor's own chat template and image handling;
    # the labelled tokens are the assistant's turn (the verdict, its end of turn), found by rendering
    # the conversation up to the reply.
    _, processor = plain_parts(Path(model_path))
    source = {r["id"]: r for r in map(json.loads, (judge_folder / "train.jsonl").read_text().splitlines())}
    terms = []
    for row in rows:
        raw = source[row["id"]]
        image = image_of(judge_folder, raw["images"][0])
        content, reply = raw["messages"][0]["content"], raw["messages"][1]["content"]
        _, whole = plain_inputs(processor, content, image, generation=False, reply=reply)
        _, head = plain_inputs(processor, content, image, generation=True)
        start = head["input_ids"].shape[1]
        ids = whole["input_ids"][0]
        assert torch.equal(ids[:start], head["input_ids"][0])  # the prompt renders the same either way
        with torch.no_grad():
            logits = model(**whole).logits[0]
        assert len(ids) - start == 7  # "[[A]]" <|im_end|> "\n": byte tokens
        terms += [F.cross_entropy(logits[t - 1][None], ids[t][None]) for t in range(start, len(ids))]
    assert loss == pytest.approx(torch.stack(terms).mean().item(), abs=1e-5)


def test_images_reach_the_judge_in_training_and_in_judging(judge_folder, tmp_path):
    """The verdict logits move with the picture: the same row with another picture gives another loss,
    and the judge engine's first generation step (the path of evaluation and `rmspec score`) reads the
    picture it is given, equal to a plain forward with that picture and different for another."""
    from rmspec.data.pipeline import prepare
    from rmspec.inference.scorers.judge import JudgeEngine
    from rmspec.spec import load_spec
    from rmspec.train.arguments import build_training_arguments
    from rmspec.train.factory import build_trainer
    from rmspec.train.modeling import load_model

    torch.set_num_threads(1)
    (judge_folder / "images.yaml").write_text(SPEC.format(method="", steps=1), encoding="utf-8")
    loaded = load_spec(judge_folder / "images.yaml")
    spec = loaded.spec
    model_dir = judge_folder / "tiny-judge"
    built = load_model(str(model_dir), spec.approach)
    prepared = prepare(loaded, built.tokenizer, cache_dir=tmp_path / "cache")
    args = build_training_arguments(spec, None, tmp_path / "ckpt", has_validation=True, use_cpu=True)
    trainer = build_trainer(spec, built.model.eval(), built.tokenizer, args, prepared.train, prepared.validation)
    row = prepared.train[0]
    other = dict(row, images=[str(judge_folder / "heldout" / "0.png")])
    assert Path(row["images"][0]).read_bytes() != Path(other["images"][0]).read_bytes()
    with torch.no_grad():
        own = trainer.compute_loss(trainer.model, trainer.data_collator([row])).item()
        swapped = trainer.compute_loss(trainer.model, trainer.data_collator([other])).item()
    assert abs(own - swapped) > 1e-5, (own, swapped)

    engine = JudgeEngine.load_judge(model_dir, spec, batch_size=2)
    assert engine.encoder is not None
    seen: list[torch.Tensor] = []
    hook = engine.model.register_forward_hook(lambda mod, args, out: seen.append(out.logits[:, -1].detach().clone()))
    model, processor = plain_parts(model_dir)
    readings = {}
    try:
        for colour in ("red", "blue"):
            path = tmp_path / f"{colour}.png"
            from PIL import Image

            Image.new("RGB", (64, 64), COLOURS[colour]).save(path)
            prompt = [
                {"role": "user", "content": [{"type": "image", "image": str(path)}, {"type": "text", "text": QUESTION}]}
            ]
            seen.clear()
            engine.verdicts([prompt], ["The picture is red."], ["The picture is blue."], batch_size=1)
            first_step = seen[0][0]
            # plain: the judge prompt rmspec documents, the picture where the prompt had it
            content = [
                {"type": "text", "text": JUDGE_INSTRUCTION + "\n\n[Prompt]\n"},
                {"type": "image"},
                {
                    "type": "text",
                    "text": f"{QUESTION}\n\n[Response A]\nThe picture is red.\n\n[Response B]\nThe picture is blue.",
                },
            ]
            _, inputs = plain_inputs(processor, content, Image.open(path).convert("RGB"), generation=True)
            with torch.no_grad():
                plain = model(**inputs).logits[0, -1]
            assert torch.allclose(first_step, plain, atol=1e-4), (first_step - plain).abs().max()
            readings[colour] = first_step
    finally:
        hook.remove()
    assert (readings["red"] - readings["blue"]).abs().max() > 1e-4


def plain_verdicts(model, processor, folder: Path, raw: dict, a: str, b: str, tokens: int) -> tuple[str, str]:
    """(greedy reply, the verdict its first step reads: A or B, whichever logit is higher after "[[").
    The judge prompt quotes the picture then the question: a held-out conversation's and a pairs row's."""
    image = image_of(folder, raw["images"][0])
    text, inputs = plain_inputs(processor, parts(a, b), image, generation=True)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=tokens, do_sample=False)
    reply = processor.tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    opened = processor(text=[text + "[["], images=[image], return_tensors="pt")
    with torch.no_grad():
        last = model(**opened).logits[0, -1]
    tok = processor.tokenizer
    reading = "A" if last[tok.convert_tokens_to_ids("A")] > last[tok.convert_tokens_to_ids("B")] else "B"
    return reply, reading


def write_pairs(folder: Path, held_out: list[dict]) -> Path:
    """The held-out pictures as (prompt, chosen, rejected) rows with an images column; chosen is A."""
    pairs = folder / "pairs.jsonl"
    rows = [
        {
            "id": raw["id"],
            "prompt": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}],
            "chosen": f"The picture is {raw['a']}.",
            "rejected": f"The picture is {raw['b']}.",
            "images": raw["images"],
        }
        for raw in held_out
    ]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return pairs


def test_a_run_trains_a_vlm_judge_and_judges_with_the_images(judge_folder, monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # 2 threads on 2 shared cores train many times slower
    held_out = [json.loads(line) for line in (judge_folder / "heldout.jsonl").read_text().splitlines()]
    pairs = write_pairs(judge_folder, held_out)
    spec = SPEC.format(method="", steps=60) + "eval: {benchmarks: [{kind: pairs, path: pairs.jsonl}]}\n"
    (judge_folder / "run.yaml").write_text(spec, encoding="utf-8")
    run = rmspec("run", "run.yaml", cwd=judge_folder, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    root = judge_folder / "runs" / "vl-judge"
    saved = root / "model"
    # the folder judges alone: it keeps the processor's settings (processor_config.json, or the image processor's own)
    assert any((saved / name).is_file() for name in ("processor_config.json", "preprocessor_config.json"))
    card = (saved / "README.md").read_text(encoding="utf-8")
    assert "AutoModelForImageTextToText.from_pretrained(PATH)" in card and "ForSequenceClassification" not in card
    model, processor = plain_parts(saved)
    plain = {
        raw["id"]: [plain_verdicts(model, processor, judge_folder, raw, a, b, 6) for a, b in orders(raw)]
        for raw in held_out
    }

    # the held-out conversations, judged in both orders with their pictures
    judged = {r["id"]: r for r in map(json.loads, (root / "eval" / "validation.jsonl").read_text().splitlines())}
    assert judged.keys() == plain.keys()
    parsed = 0
    for key, ((first, first_reading), (swapped, swapped_reading)) in plain.items():
        row = judged[key]
        assert (row["output"], row["output_swapped"]) == (first, swapped), key
        for output, verdict, reading in (
            (first, row["verdict"], first_reading),
            (swapped, row["verdict_swapped"], swapped_reading),
        ):
            if output.startswith("[[") and verdict is not None:
                assert verdict == reading, key  # the verdict is the A/B reading after "[[" of a plain forward
                parsed += 1
    assert parsed >= len(held_out)  # the judge learnt to write a verdict: the readings were compared
    results = json.loads((root / "results.json").read_text())
    assert results["validation"]["num_examples"] == len(held_out)

    # the trainer's final reading of the held-out rows (first order): parse rate and agreement
    gold = {raw["id"]: raw["messages"][1]["content"][2] for raw in held_out}
    verdicts = {key: parse_verdict(replies[0][0], r"\[\[(A|B)\]\]") for key, replies in plain.items()}
    final = [
        r for r in map(json.loads, (root / "metrics.jsonl").read_text().splitlines()) if "eval/sft/parse_rate" in r
    ]
    assert final[-1]["eval/sft/parse_rate"] == pytest.approx(
        sum(v is not None for v in verdicts.values()) / len(held_out)
    )
    assert final[-1]["eval/sft/agreement"] == pytest.approx(sum(verdicts[k] == gold[k] for k in gold) / len(held_out))

    # the pairs benchmark with pictures, and `rmspec score RUN`: (prompt, chosen, rejected) rows, chosen as A
    bench = [
        json.loads(line) for line in Path(results["benchmarks"]["pairs"]["per_example_path"]).read_text().splitlines()
    ]
    out = judge_folder / "scored.jsonl"
    score = rmspec("score", str(root), str(pairs), "--out", str(out), cwd=judge_folder)
    assert score.returncode == 0, score.stderr[-3000:]
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(bench) == len(scored) == len(held_out)
    for raw, row, from_bench in zip(held_out, scored, bench):
        reply, _ = plain_verdicts(model, processor, judge_folder, raw, raw["a"], raw["b"], 6)
        swapped, _ = plain_verdicts(model, processor, judge_folder, raw, raw["b"], raw["a"], 6)
        assert row["judge_output"] == reply, (raw["id"], row, reply)
        assert (from_bench["output"], from_bench["output_swapped"]) == (reply, swapped), raw["id"]

    # `rmspec serve RUN`: OpenAI chat completions with an image_url part (a data: URI) where the picture goes
    from fastapi.testclient import TestClient

    from rmspec.inference.engine import load_scorer
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    raw = held_out[0]
    picture = "data:image/png;base64," + base64.b64encode((judge_folder / raw["images"][0]).read_bytes()).decode()
    content = [dict(p) for p in parts(raw["a"], raw["b"])]
    content[1] = {"type": "image_url", "image_url": {"url": picture}}
    reply, _ = plain_verdicts(model, processor, judge_folder, raw, raw["a"], raw["b"], 6)
    _, inputs = plain_inputs(
        processor, parts(raw["a"], raw["b"]), image_of(judge_folder, raw["images"][0]), generation=True
    )
    with torch.no_grad():
        first_plain = model(**inputs).logits[0, -1]
    engine = load_scorer(root)
    seen: list[torch.Tensor] = []
    hook = engine.model.register_forward_hook(lambda mod, args, out: seen.append(out.logits[:, -1].detach().clone()))
    with TestClient(create_app(Service(engine, model_name="judge"))) as client:
        answer = client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": content}], "max_tokens": 6}
        )
        hook.remove()
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == reply
        # the served first step read the picture: equal to the plain forward with it (a reply alone may not show it)
        assert torch.allclose(seen[0][0], first_plain, atol=1e-4), (seen[0][0] - first_plain).abs().max()
        forged = [*content, {"type": "text", "text": " \ufffc"}]  # a picture's place forged in text: 400, not a crash
        refused = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": forged}]})
        assert refused.status_code == 400 and f"messages.0.content.{len(content)}" in refused.text, refused.text
        tagged = [*content, {"type": "text", "text": " What is <image>?"}]  # `<image>` written in text is text
        answered = client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": tagged}], "max_tokens": 2}
        )
        assert answered.status_code == 200, answered.text


def orders(raw: dict) -> list[tuple[str, str]]:
    return [(raw["a"], raw["b"]), (raw["b"], raw["a"])]


def test_sft_judges_take_images_and_grpo_judges_refuse_them_with_the_reason(judge_folder):
    from rmspec import approaches
    from rmspec.approaches.generative import Generative

    declared = approaches.get("generative")
    assert declared.image_refusal(Generative(kind="generative")) is None
    assert "method: grpo" in declared.image_refusal(Generative(kind="generative", method="grpo"))
    # a GRPO judge's preference pairs with a picture: the data stage refuses them, exit 2, with the reason
    pairs = judge_folder / "grpo_pairs.jsonl"
    pairs.write_text(
        json.dumps({"prompt": QUESTION, "chosen": "red", "rejected": "blue", "images": ["heldout/0.png"]}) + "\n",
        encoding="utf-8",
    )
    spec = SPEC.format(method=", method: grpo", steps=1).replace("train.jsonl", "grpo_pairs.jsonl")
    spec = spec.replace("{preset: messages}", "{preset: pairs}").replace("heldout.jsonl", "grpo_pairs.jsonl")
    (judge_folder / "grpo.yaml").write_text(spec, encoding="utf-8")
    out = rmspec("data", "preview", "grpo.yaml", cwd=judge_folder)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "method: grpo does not train on images" in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_a_text_judge_given_images_stops_with_the_reason():
    """No silent drop at judging either: prompts with pictures and no image side are an error (exit 2)."""
    from rmspec.errors import RmspecError
    from rmspec.inference.judge import generate_requests, judge_request

    prompt = [{"role": "user", "content": [{"type": "image", "image": "x.png"}, {"type": "text", "text": QUESTION}]}]
    from rmspec.vision.marks import PICTURE

    message, images = judge_request(prompt, "red", "blue")
    # the picture's place is the mark no text can forge (rmspec.vision.marks), not `<image>` text
    assert f"[Prompt]\n{PICTURE}What colour" in message and images == ["x.png"] and "<image>" not in message
    with pytest.raises(RmspecError, match="the judge is a text model") as caught:
        generate_requests(None, None, [[1, 2]], [images], 4, encoder=None)
    assert caught.value.exit_code == 2
