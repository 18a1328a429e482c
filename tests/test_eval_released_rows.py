"""Every benchmark kind on rows shaped as its released files are (issue 47 item 2): each row reads,
none crashes, the counts match the file, and VL-RewardBench's prompt is built as its authors' script
builds it.

The shapes were read from the benchmarks' public releases on 2026-11-28: the keys, their order and
types, nulls, extra fields, id forms, file layouts and quirks are theirs; the texts and pictures are
made up here. No released text is copied, since several licences do not allow it:
- VL-RewardBench (hub MMInstruction/VL-RewardBench, test split parquet; code github
  vl-rewardbench/VL_RewardBench): "research use only" on the card. 448 of its 1,250 queries begin with
  `<image>\\n`, which `inference_hf.py` removes (`question.replace("<image>\\n","")`); the message is
  `[text, image_url]`.
- Multimodal RewardBench (github facebookresearch/multimodal_rewardbench, CC BY-NC 4.0):
  `data/all_data.json`, a JSON list of {ID, Text, Image, Output1, Output2, Better, Category};
  `scripts/1_run_model_as_judge_gpt4o.py` sends `[text, image_url]`.
- RewardBench (hub allenai/reward-bench `filtered`, ODC-BY) and RewardBench 2 (allenai/reward-bench-2
  `test`): parquet; v1 ids are integers; v2 lists of completions, Ties ids `ref:N` / `tied:N`.
- RM-Bench (github THU-KEG/RM-Bench `data/`, no licence file): per-domain `<domain>_filtered.json`
  lists without a `domain` key (integer ids, extra keys subset/error_key/error/language/task_id),
  and `total_dataset.json` with `domain`.
- JudgeBench (github ScalerLab/JudgeBench `data/`, no licence file): JSONL; `original_id` an integer
  for mmlu-pro rows and null for the others; sources such as `mmlu-pro-computer science`.
- RMB (github Zhou-Zoey/RMB-Reward-Model-Benchmark `RMB_dataset/`, no licence file): a folder tree of
  JSON lists whose names hold spaces; 199 of 18,329 messages have no `language`.
- PRMBench (github ssmisya/PRMBench, Apache-2.0; hub hitsmy/PRMBench_Preview): JSONL; multi_solutions
  rows add ground_truth/original_response; one file repeats 5 of its idx; error steps past the end.
- ProcessBench (hub Qwen/ProcessBench, four splits): id `gsm8k-0`, generator, problem, steps,
  final_answer_correct, label.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from helpers.ci import need
from helpers.runs import rmspec


def png(colour: tuple[int, int, int], size: tuple[int, int] = (40, 40)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def length_scores(examples) -> list[list[float]]:
    """The stand-in reward model: a response's reward is its length in characters."""
    return [[float(len(r)) for r in ex.responses] for ex in examples]


def load(kind_name: str, path: Path):
    from rmspec.evaluate import registry

    kind = registry.get(kind_name)
    return kind, kind.load(str(path))


# ---------------------------------------------------------------------- VL-RewardBench

# (id, query, human_ranking): the released id forms of the six source sets, queries as released
# (the hallucination sets' placeholder line; a query that keeps `<image>` as text after it).
VL_ROWS = [
    ("RLAIF-V-1022", "<image>\nDescribe this image in detail.", [0, 1]),
    ("RLHF-V-71", "<image>\nWhat is the man holding?", [1, 0]),
    ("hallucination_pair-412", "<image>\nIs there a red car in the image?", [0, 1]),
    ("wildvision_battle_23", "What does the sign say?", [1, 0]),
    ("mathverse_1190", "According to the question shown in the image, find x.", [0, 1]),
    ("mmmu-pro_88", "Which option fits the diagram? (A) 1 (B) 2", [1, 0]),
    ("VLFeedback-3301", "Write HTML for this layout.", [0, 1]),
]
# A query that keeps `<image>` as text once the placeholder line is gone (the kind leaves it as text;
# how the model's processor reads such text is the vision collator's, tests/test_vision_*).
LITERAL = ("VLFeedback-3302", "<image>\nWhich tag shows a picture: <image> or <img>?", [1, 0])
COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30), (30, 200, 200), (200, 30, 200), (90, 90, 90)]


def write_vl_parquet(folder: Path, items=VL_ROWS) -> tuple[Path, list[dict]]:
    """The hub's test split: an Image feature ({bytes, path}), int64 rankings, null rationale and
    ground truth, and one item twice (cal.py counts an item once)."""
    pa = need("pyarrow")
    import pyarrow.parquet as pq

    rows = []
    for k, (example_id, query, ranking) in enumerate(items):
        rows.append(
            {
                "id": example_id,
                "query": query,
                "response": [f"Answer one to item {k}, fairly long.", f"Answer two {k}."],
                "image": {"bytes": png(COLOURS[k % len(COLOURS)]), "path": f"{example_id}.png"},
                "human_ranking": ranking,
                "models": ["gpt-4o", "claude-3-5-sonnet"] if k % 2 else ["llava-1.5", None],
                "judge": "human",
                "rationale": None if k % 3 else "Answer one names the object correctly.",
                "query_source": example_id.split("-")[0].split("_")[0],
                "ground_truth": "B" if example_id.startswith("mmmu") else None,
            }
        )
    rows.append(dict(rows[0]))
    path = folder / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path, rows


def test_vl_rewardbench_builds_the_official_message(tmp_path):
    """Text first, then the picture; `<image>\\n` removed as inference_hf.py removes it; any other
    `<image>` stays text; every distinct item read once."""
    items = [*VL_ROWS, LITERAL]
    path, rows = write_vl_parquet(tmp_path, items)
    _, data = load("vl_rewardbench", path)
    assert len(rows) == len(items) + 1 and len(data.examples) == len(items)
    for example, (example_id, query, _) in zip(data.examples, items, strict=True):
        assert example.id == example_id
        (turn,) = example.prompt
        assert [p["type"] for p in turn["content"]] == ["text", "image"]
        assert turn["content"][0]["text"] == query.replace("<image>\n", "")
        assert turn["content"][1]["image"].startswith("data:image")
    assert data.examples[0].prompt[0]["content"][0]["text"] == "Describe this image in detail."
    assert data.examples[-1].prompt[0]["content"][0]["text"] == "Which tag shows a picture: <image> or <img>?"


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    need("torch")
    from rmspec.vision.tiny import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"), seed=3)


def plain_reward(model_dir: Path, text: str, picture: bytes, response: str) -> float:
    """Plain transformers, the message as inference_hf.py builds it: [text, image], then the reply."""
    import torch
    from PIL import Image
    from transformers import AutoConfig, AutoProcessor

    from rmspec.vision.models import reward_class
    from rmspec.vision.tiny import processor_class

    processor_class()
    model = reward_class(AutoConfig.from_pretrained(model_dir)).from_pretrained(model_dir).eval()
    processor = AutoProcessor.from_pretrained(model_dir)
    messages = [
        {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image"}]},
        {"role": "assistant", "content": response},
    ]
    rendered = processor.apply_chat_template(messages, tokenize=False)
    image = Image.open(io.BytesIO(picture)).convert("RGB")
    inputs = processor(text=[rendered], images=[image], return_tensors="pt")
    with torch.no_grad():
        return float(model(**inputs).logits[0, 0])


def test_rmspec_eval_runs_vl_rewardbench_as_released(tiny_vlm, tmp_path):
    """`rmspec eval` on the released layout: exit 0, one row per distinct item, and the rewards of a
    placeholder row equal a plain forward of the official message."""
    path, rows = write_vl_parquet(tmp_path)
    out = tmp_path / "out"
    done = rmspec(
        "eval",
        str(tiny_vlm),
        "--benchmark",
        "vl_rewardbench",
        "--path",
        str(path),
        "--out",
        str(out),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (entry,) = json.loads(done.stdout).values()
    assert entry["num_examples"] == len(VL_ROWS) and entry["counts"]["rlhf-v"] == 1
    scored = [json.loads(line) for line in Path(entry["per_example_path"]).read_text().splitlines()]
    assert [r["id"] for r in scored] == [r[0] for r in VL_ROWS]
    first = rows[1]  # RLHF-V-71: "<image>\n" + question, the second response preferred
    row = next(r for r in scored if r["id"] == first["id"])
    text = first["query"].replace("<image>\n", "")
    picture = first["image"]["bytes"]
    assert row["score_chosen"] == pytest.approx(plain_reward(tiny_vlm, text, picture, first["response"][1]), abs=1e-5)
    assert row["score_rejected"] == pytest.approx(plain_reward(tiny_vlm, text, picture, first["response"][0]), abs=1e-5)
