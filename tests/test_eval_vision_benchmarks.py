"""VL-RewardBench and Multimodal RewardBench (issue 37 V2): small files written in the released
layouts (generated pictures), their figures against the official rules written out here from the
raw files (cal.py's id prefix, groups and macro average; 2_get_accuracy.py's category split), the
per-example rows against the raw rankings, located errors (exit 2) for malformed files, and the
`pairs` kind with an images column."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from PIL import Image

from helpers.ci import need
from rmspec.errors import DataError


def reward(text: str) -> float:
    """The stand-in model: a response's reward is its number of characters (ties possible)."""
    return float(len(text))


def picture(path: Path, colour: tuple[int, int, int]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (32, 24), colour).save(path)
    return str(path)


# ---------------------------------------------------------------------- VL-RewardBench

VL_ITEMS = [
    # (id, query, responses, human_ranking): the rank-0 response is the human-preferred one
    ("RLAIF-V-14", "Describe it.", ["short", "a much longer answer"], [0, 1]),  # wrong (longer loses)
    ("RLAIF-V-15", "Describe it.", ["a long good answer", "bad"], [0, 1]),  # right
    ("RLHF-V-2", "What is shown?", ["xx", "yyyy"], [1, 0]),  # right: response 1 preferred and longer
    ("mathverse_3", "Solve.", ["12345", "54321"], [0, 1]),  # tie: wrong
    ("mmmu-4", "Which option?", ["(A) because", "(B)"], [0, 1]),  # right
    ("wildvision_battle_5", "Caption it.", ["a", "bb"], [0, 1]),  # wrong
    ("hallucination_pair-6", "Is there a dog?", ["No dog.", "Yes, a big brown dog."], [0, 1]),  # wrong
    ("LRVInstruction-000000007746", "The dog has one ear.", ["long hallucinated text", "No."], [1, 0]),  # wrong
    ("VLFeedback-9", "Summarise.", ["the fuller summary", "meh"], [0, 1]),  # right
    ("povid_10", "Count.", ["three", "two"], [0, 1]),  # right; prefix 'povid' is not 'hallucination': vlfeedback
]


def write_vl_file(folder: Path, items=VL_ITEMS, duplicate: bool = True) -> Path:
    rows = []
    for k, (example_id, query, responses, ranking) in enumerate(items):
        image = f"images/set/{example_id}.png"
        picture(folder / image, (k * 20 % 255, 100, 200))
        rows.append(
            {
                "id": example_id,
                "image_path": image,
                "query": query,
                "response": responses,
                "human_ranking": ranking,
                "models": ["m1", "m2"],
                "judge": "human",
                "rationale": None,
                "query_source": "test",
                "meta": {"note": "generated"},
            }
        )
    if duplicate:
        rows.append(dict(rows[1]))  # cal.py counts an item once
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def official_vl(path: Path) -> dict[str, float]:
    """cal.py's rule, written out from the raw file: the set from the id prefix (text before the first
    '_' or '-'), one count per (id, query, sorted responses), groups, overall and macro average."""
    sets = {"RLAIF": "rlaif-v", "RLHF": "rlhf-v", "mathverse": "reasoning_tasks", "mmmu": "reasoning_tasks"}
    sets.update({"wildvision": "wildvision-battle", "hallucination": "povid"})
    group_of = {"vlfeedback": "general", "wildvision-battle": "general", "povid": "hallucination"}
    group_of.update({"rlhf-v": "hallucination", "rlaif-v": "hallucination", "reasoning_tasks": "reasoning"})
    seen, correct, total = set(), defaultdict(int), defaultdict(int)
    for line in path.read_text().splitlines():
        item = json.loads(line)
        key = item["id"] + item["query"] + "\t".join(sorted(item["response"]))
        if key in seen:
            continue
        seen.add(key)
        prefix = re.split(r"[_-]", item["id"], maxsplit=1)[0]
        group = group_of[sets.get(prefix, "vlfeedback")]
        better = item["response"][item["human_ranking"].index(0)]
        worse = item["response"][item["human_ranking"].index(1)]
        correct[group] += reward(better) > reward(worse)
        total[group] += 1
    groups = {g: correct[g] / total[g] for g in ("general", "hallucination", "reasoning")}
    return {
        **groups,
        "overall": sum(correct.values()) / sum(total.values()),
        "macro": sum(groups.values()) / 3,
    }


def kind_rows(kind_name: str, path: Path):
    from rmspec.evaluate import registry

    kind = registry.get(kind_name)
    data = kind.load(str(path))
    rows = kind.per_example_rows(data, [[reward(r) for r in ex.responses] for ex in data.examples])
    return kind, data, rows


def test_vl_rewardbench_figures_follow_cal_py(tmp_path):
    path = write_vl_file(tmp_path)
    kind, data, rows = kind_rows("vl_rewardbench", path)
    assert len(rows) == len(VL_ITEMS)  # the duplicate item counted once
    assert rows[0]["group"] == "hallucination" and rows[-1]["group"] == "general"
    # per-example rows: the human-preferred response's reward is score_chosen
    raw = {i: (q, resp, rank) for i, q, resp, rank in VL_ITEMS}
    for row in rows:
        _, responses, ranking = raw[row["id"]]
        assert row["score_chosen"] == reward(responses[ranking.index(0)])
        assert row["score_rejected"] == reward(responses[ranking.index(1)])
    figures = kind.score(rows)
    expected = official_vl(path)
    assert figures.overall == pytest.approx(expected["overall"])
    assert figures.details["macro_average"] == pytest.approx(expected["macro"])
    for group in ("general", "hallucination", "reasoning"):
        assert figures.sections[group] == pytest.approx(expected[group])
    assert figures.subsets["vlfeedback"] == pytest.approx(2 / 3)  # VLFeedback-9, povid_10 right; LRV wrong
    assert figures.counts["reasoning_tasks"] == 2


def test_vl_rewardbench_prompt_holds_the_checked_image(tmp_path):
    path = write_vl_file(tmp_path, duplicate=False)
    _, data, _ = kind_rows("vl_rewardbench", path)
    first = data.examples[0].prompt
    parts = first[0]["content"]  # the text, then the picture, as the official inference_hf.py sends them
    assert parts[0] == {"type": "text", "text": "Describe it."}
    assert parts[1]["type"] == "image" and Path(parts[1]["image"]) == (tmp_path / "images/set/RLAIF-V-14.png").resolve()


def test_vl_rewardbench_parquet_with_image_bytes(tmp_path):
    """The hub layout: an `image` column holding the picture's bytes (an Image feature)."""
    pa = need("pyarrow")
    import io

    import pyarrow.parquet as pq

    rows = []
    for example_id, query, responses, ranking in VL_ITEMS[:3]:
        buffer = io.BytesIO()
        Image.new("RGB", (16, 16), (1, 2, 3)).save(buffer, format="PNG")
        rows.append(
            {
                "id": example_id,
                "query": query,
                "response": responses,
                "human_ranking": ranking,
                "image": {"bytes": buffer.getvalue(), "path": f"{example_id}.png"},
            }
        )
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    kind, data, out = kind_rows("vl_rewardbench", tmp_path / "test.parquet")
    assert [r["id"] for r in out] == ["RLAIF-V-14", "RLAIF-V-15", "RLHF-V-2"]
    assert data.examples[0].prompt[0]["content"][1]["image"].startswith("data:image")
    assert kind.score(out).overall == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda row: row.update(human_ranking=[0, 0]), "human_ranking"),
        (lambda row: row.update(response=["only one"]), "two responses"),
        (lambda row: row.update(image_path="images/nowhere.png"), "missing"),
    ],
)
def test_vl_rewardbench_malformed_rows_stop_with_the_row(tmp_path, change, words):
    path = write_vl_file(tmp_path, duplicate=False)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows[2])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as caught:
        kind_rows("vl_rewardbench", path)
    assert "row 2" in str(caught.value) and words in str(caught.value)
    assert caught.value.exit_code == 2


def test_vl_rewardbench_broken_image_is_located(tmp_path):
    path = write_vl_file(tmp_path, duplicate=False)
    (tmp_path / "images/set/mmmu-4.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    with pytest.raises(DataError, match=r"row 4 .*mmmu-4.*(undecodable|truncated)"):
        kind_rows("vl_rewardbench", path)


# ---------------------------------------------------------------------- Multimodal RewardBench

MM_ITEMS = [
    # (ID, Category, Output1, Output2, Better)
    ("nocaps_1", "open_generation/correctness_task", "a long caption", "short", "Output1"),  # right
    ("visitbench_2", "open_generation/preference_task", "tiny", "a longer one", "Output1"),  # wrong
    ("pairs_3", "safety", "no", "a refusal, kindly", "Output2"),  # bias: right
    ("PAIRS_4", "safety", "a long biased answer", "ok", "Output2"),  # bias (case ignored): wrong
    ("hateful_5", "safety", "a careful answer", "rude", "Output1"),  # toxicity: right
    ("mathvista_6", "reasoning", "42", "41", "Output1"),  # math: tie, wrong
    ("EMMA-Coding_7", "reasoning", "x", "def f(): pass", "Output2"),  # coding: right
    ("MMBench_8", "knowledge", "(A)", "(B) since", "Output2"),  # right
    ("RealworldQA_9", "vqa", "yes it is", "no", "Output2"),  # wrong
]


def write_mm_file(folder: Path) -> Path:
    data = []
    for k, (example_id, category, out1, out2, better) in enumerate(MM_ITEMS):
        image = f"images/src/{k}.jpg"
        picture(folder / image, (k * 25, 50, 50))
        data.append(
            {
                "ID": example_id,
                "Text": f"Question {k}?",
                "Image": image,
                "Output1": out1,
                "Output2": out2,
                "Better": better,
                "Category": category,
            }
        )
    path = folder / "all_data.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def official_mm(path: Path) -> dict[str, float]:
    """2_get_accuracy.py's rule from the raw file: label B for Output2 else A; a reward model's pick is
    the strictly higher output (a tie is wrong); categories split by the id."""
    accs = defaultdict(list)
    for ex in json.loads(path.read_text()):
        label = "B" if ex["Better"] == "Output2" else "A"
        r1, r2 = reward(ex["Output1"]), reward(ex["Output2"])
        pred = "A" if r1 > r2 else "B" if r2 > r1 else None
        acc = int(pred == label)
        accs["all"].append(acc)
        category = ex["Category"]
        if category == "safety":
            category = "safety/bias" if ex["ID"].lower().startswith("pairs") else "safety/toxicity"
        elif category == "reasoning":
            category = "reasoning/math" if ex["ID"].lower().startswith("math") else "reasoning/coding"
        accs[category].append(acc)
    return {task: sum(v) / len(v) for task, v in accs.items()}


def test_multimodal_rewardbench_figures_follow_2_get_accuracy(tmp_path):
    path = write_mm_file(tmp_path)
    kind, data, rows = kind_rows("multimodal_rewardbench", path)
    expected = official_mm(path)
    figures = kind.score(rows)
    assert figures.overall == pytest.approx(expected.pop("all"))
    assert figures.subsets == pytest.approx(expected)
    assert set(figures.subsets) >= {"safety/bias", "safety/toxicity", "reasoning/math", "reasoning/coding"}
    labels = {i: ("A" if b == "Output1" else "B") for i, *_, b in MM_ITEMS}
    assert [row["label"] for row in rows] == [labels[row["id"]] for row in rows]
    first = data.examples[0].prompt[0]["content"]  # text, then image, as 1_run_model_as_judge_gpt4o.py sends them
    assert first[0]["type"] == "text" and Path(first[1]["image"]) == (tmp_path / "images/src/0.jpg").resolve()


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [("Better", "Output3", "Better must be"), ("Text", "", "0_download_data.py"), ("Image", "gone.jpg", "missing")],
)
def test_multimodal_rewardbench_malformed_rows_stop_with_the_row(tmp_path, field, value, words):
    path = write_mm_file(tmp_path)
    data = json.loads(path.read_text())
    data[3][field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as caught:
        kind_rows("multimodal_rewardbench", path)
    assert "row 3" in str(caught.value) and words in caught.value.render_plain()


def test_multimodal_rewardbench_needs_a_file():
    from rmspec.evaluate import registry

    with pytest.raises(DataError, match="needs a file"):
        registry.get("multimodal_rewardbench").load(None)


# ---------------------------------------------------------------------- pairs with images


def test_pairs_kind_reads_an_images_column(tmp_path):
    ok = picture(tmp_path / "pics" / "red.png", (255, 0, 0))
    rows = [
        {
            "prompt": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Colour?"}]}],
            "chosen": "Red.",
            "rejected": "Blue.",
            "images": ["pics/red.png"],
        },
        {"prompt": "<image>Colour?", "chosen": "Red.", "rejected": "Green.", "images": ["pics/none.png"]},
        {"prompt": "Colour?", "chosen": "Red.", "rejected": "Green.", "images": ["pics/red.png"]},  # no image part
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kind, data, out = kind_rows("pairs", path)
    assert len(data.examples) == 1
    prompt = data.examples[0].prompt
    parts = prompt[-1]["content"]
    assert [p["type"] for p in parts] == ["image", "text"] and Path(parts[0]["image"]) == Path(ok).resolve()
    assert any("image_missing" in note for note in data.notes)
    assert any("image_count_mismatch" in note for note in data.notes)


def test_a_text_model_is_refused_on_images(tmp_path):
    from rmspec.evaluate import registry

    class TextModel:
        kind = "reward"

        def score_groups(self, groups):
            return [[reward(r) for r in responses] for _, responses in groups]

    kind = registry.get("vl_rewardbench")
    data = kind.load(str(write_vl_file(tmp_path, duplicate=False)))
    with pytest.raises(DataError, match="reads text only"):
        kind.scored_rows(TextModel(), data)
