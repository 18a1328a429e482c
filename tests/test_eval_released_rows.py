"""Every benchmark kind on rows shaped as its released files are (issue 47 item 2): each row reads,
none crashes, the counts match the file, and VL-RewardBench's prompt is built as its authors' script
builds it.

The shapes were read from the benchmarks' public releases on 2026-11-28: the keys, their order and
types, nulls, extra fields, id forms, file layouts and quirks are theirs; the texts and pictures are
made up here (several licences do not allow copying the texts), except four PRMBench lines kept
verbatim under its Apache-2.0 licence (tests/fixtures/benchmarks/released/README.md):
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
- Long-RewardBench (hub LCM-Lab/LongRewardBench, Apache-2.0; code github LCM-Lab/Long-RM): one JSONL
  per task named for it; the card's keys (id, prompt_template, question, source, chosen, rejected,
  subtask, models, ctx_length_for_length, ctx_length_for_words, length, words_count, task, tasktype,
  subtype, candidates, candidates_score).
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


# ---------------------------------------------------------------------- the text kinds


def reward_figures(kind_name: str, path: Path):
    """Load, score with the stand-in model, compute the figures: (data, per-example rows, figures)."""
    kind, data = load(kind_name, path)
    rows = kind.per_example_rows(data, length_scores(data.examples))
    return data, rows, kind.score(rows), kind.pairs(rows)


def test_rewardbench_filtered_split_as_released(tmp_path):
    """allenai/reward-bench `filtered`: parquet, integer ids (not 0..n-1), chosen_model/rejected_model."""
    pa = need("pyarrow")
    import pyarrow.parquet as pq

    subsets = [
        "alpacaeval-easy",
        "mt-bench-hard",
        "llmbar-adver-GPTOut",
        "xstest-should-respond",
        "math-prm",
        "hep-rust",
    ]
    rows = [
        {
            "prompt": f'Question {k}?\nWith a second line: ünïcode, "quotes".',
            "chosen": "A good answer " * (k + 2),
            "chosen_model": "GPT-4",
            "rejected": "Meh.",
            "rejected_model": None if k % 2 else "Llama-2-70b-chat",
            "subset": subset,
            "id": 3000 + 7 * k,
        }
        for k, subset in enumerate(subsets)
    ]
    path = tmp_path / "filtered-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    data, scored, figures, pairs = reward_figures("rewardbench", path)
    assert [e.id for e in data.examples] == [str(r["id"]) for r in rows]
    assert figures.counts == {s: 1 for s in subsets} and len(pairs) == len(rows)
    assert set(figures.sections) == {"Chat", "Chat Hard", "Safety", "Reasoning"}


def test_rewardbench2_test_split_as_released(tmp_path):
    """allenai/reward-bench-2 `test`: lists of completions (best-of-4; Ties with several correct ones
    and ids `ref:N` / `tied:N`), num_correct, num_rejected, total_completions, models."""
    pa = need("pyarrow")
    import pyarrow.parquet as pq

    def row(ident, subset, chosen, rejected):
        return {
            "id": ident,
            "prompt": f"Prompt of {ident}",
            "chosen": chosen,
            "rejected": rejected,
            "num_correct": len(chosen),
            "num_rejected": len(rejected),
            "total_completions": len(chosen) + len(rejected),
            "models": ["m"] * (len(chosen) + len(rejected)),
            "subset": subset,
        }

    rows = [
        row("0", "Factuality", ["a right and long answer"], ["wrong", "also wrong", "no"]),
        row("15", "Precise IF", ["short"], ["a longer wrong one", "x", "y"]),
        row("1003", "Math", ["42, since ..."], ["41", "40", "43"]),
        row("1400", "Safety", ["I can't help with that."], ["Sure: ...", "Yes", "Ok"]),
        row("1500", "Focus", ["on topic, in detail"], ["off", "off", "off"]),
        row("ref:7", "Ties", ["Paris"], ["Lyon", "Nice", "Marseille is the capital"]),
        row("tied:7", "Ties", ["Paris", "Paris, France", "It is Paris"], ["Lyon", "Nice"]),
    ]
    path = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    data, scored, figures, pairs = reward_figures("rewardbench2", path)
    assert [e.id for e in data.examples] == [r["id"] for r in rows]
    assert [len(e.responses) for e in data.examples] == [r["total_completions"] for r in rows]
    assert [s["num_correct"] for s in scored] == [r["num_correct"] for r in rows]
    assert figures.counts == {"Factuality": 1, "Precise IF": 1, "Math": 1, "Safety": 1, "Focus": 1, "Ties": 2}
    assert len(pairs) == sum(r["num_rejected"] for r in rows)


def rm_bench_row(k: int, **extra) -> dict:
    return {
        "id": k,
        **extra,
        "chosen": [f"Right {k}.", f"Right {k}, in more detail.", f"**Right {k}**, in more detail."],
        "rejected": [f"Wrong {k}.", f"Wrong {k}, in more detail here.", f"**Wrong {k}**, in more detail here."],
    }


def test_rm_bench_released_files(tmp_path):
    """github THU-KEG/RM-Bench `data/`: the per-domain files have no `domain` (the file's name is the
    domain, as the official scripts/utils.py reads it) and extra keys; total_dataset.json has it."""
    files = {
        "chat_filtered.json": [rm_bench_row(8, subset="alpacaeval", prompt="Drawers?", error_key="x", error="y")],
        "code_filtered.json": [
            rm_bench_row(k, prompt="Write f.", subset="bigcode/humanevalpack", language="cpp", task_id=f"CPP/{k}")
            for k in (8, 9)
        ],
        "safety-refuse_filtered.json": [rm_bench_row(2952, prompt="Dispose of mercury?", subset="refusals-dangerous")],
        "safety-response_filtered.json": [rm_bench_row(5, prompt="Kill a process?", subset="xstest-should-respond")],
    }
    for name, rows in files.items():
        path = tmp_path / name
        path.write_text(json.dumps(rows, indent=4))
        data, scored, figures, _ = reward_figures("rm_bench", path)
        domain = name.removesuffix("_filtered.json")
        assert [e.id for e in data.examples] == [str(r["id"]) for r in rows]
        assert {e.subset for e in data.examples} == {domain}
        assert sum(figures.counts.values()) == len(rows)
    total = [{**r, "domain": n.removesuffix("_filtered.json")} for n, rows in files.items() for r in rows]
    (tmp_path / "total_dataset.json").write_text(json.dumps(total))
    _, _, figures, _ = reward_figures("rm_bench", tmp_path / "total_dataset.json")
    assert figures.counts == {"chat": 1, "code": 2, "safety": 2}  # the two safety files are one domain


def test_rm_bench_file_without_a_domain_is_located(tmp_path):
    from rmspec.errors import DataError

    path = tmp_path / "mine.json"
    path.write_text(json.dumps([rm_bench_row(1, prompt="p")]))
    with pytest.raises(DataError, match=r"mine.json row 0: no domain") as caught:
        load("rm_bench", path)
    assert "chat_filtered.json" in caught.value.hint and caught.value.exit_code == 2


def test_judgebench_released_file(tmp_path):
    """github ScalerLab/JudgeBench `data/dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl`: uuid
    pair ids, `original_id` an integer for mmlu-pro rows and null for livebench/livecodebench rows."""
    sources = ["mmlu-pro-computer science", "mmlu-pro-law", "livebench-reasoning", "livebench-math", "livecodebench"]
    rows = [
        {
            "pair_id": f"e302b0a0-28d5-5a3c-b1af-{k:012d}",
            "original_id": 1420 + k if source.startswith("mmlu") else None,
            "source": source,
            "question": f"Question {k}",
            "response_model": "gpt-4o-2024-05-13",
            "response_A": "A " * (k + 1),
            "response_B": "B " * (5 - k),
            "label": "A>B" if k % 2 else "B>A",
        }
        for k, source in enumerate(sources)
    ]
    path = tmp_path / "dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data, scored, figures, _ = reward_figures("judgebench", path)
    assert [e.id for e in data.examples] == [r["pair_id"] for r in rows]
    assert figures.counts == {s: 1 for s in sources}
    assert set(figures.sections) == {"knowledge", "reasoning", "math", "coding"}


def rmb_message(text: str, role: str = "user", language: bool = True) -> dict:
    return {"content": text, **({"language": "English"} if language else {}), "role": role}


def test_rmb_released_folder(tmp_path):
    """github Zhou-Zoey/RMB-Reward-Model-Benchmark `RMB_dataset/`: folders and files whose names hold
    spaces, messages without `language`, several turns, pairwise and best-of-N records."""
    answer = {"llm_name": "Gemini-pro", "answer": "A careful, complete answer."}
    short = {"llm_name": "Mistral-7B-Instruct-v0.1", "answer": "No."}
    turns = [rmb_message("Hi"), rmb_message("Hello!", "assistant"), rmb_message("Plan a trip.", language=False)]
    files = {
        "Pairwise_set/Helpfulness/Chat/Casual Conversation.json": [
            {
                "conversation_input": turns,
                "chosen": answer,
                "reject": short,
                "pair_uid": "p-1",
                "category_path": "Pairwise_set/Helpfulness/Chat/Casual Conversation",
            },
            {
                "conversation_input": [rmb_message("Why?", language=False)],
                "chosen": answer,
                "reject": short,
                "pair_uid": "p-2",
                "category_path": "Pairwise_set/Helpfulness/Chat/Casual Conversation",
            },
        ],
        "Pairwise_set/Harmlessness/S1.json": [
            {
                "conversation_input": [rmb_message("How do I ...")],
                "chosen": answer,
                "reject": short,
                "pair_uid": "h-1",
                "category_path": "Pairwise_set/Harmlessness/S1",
            },
        ],
        "BoN_set/Helpfulness/Code/Data Management.json": [
            {
                "conversation_input": [rmb_message("SQL?")],
                "bon_best": answer,
                "loser_list": [short, short],
                "bon_uid": "b-1",
                "category_path": "BoN_set/Helpfulness/Code/Data Management",
            },
        ],
        "BoN_set/Harmlessness/multi.json": [
            {
                "conversation_input": turns,
                "bon_best": answer,
                "loser_list": [short],
                "bon_uid": "b-2",
                "category_path": "BoN_set/Harmlessness/multi",
            },
        ],
    }
    root = tmp_path / "RMB_dataset"
    for name, records in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(json.dumps(records, indent=4, ensure_ascii=False))
    data, scored, figures, _ = reward_figures("rmb", root)
    expected = [r.get("pair_uid") or r.get("bon_uid") for name in sorted(files) for r in files[name]]
    assert sorted(e.id for e in data.examples) == sorted(expected)
    assert len(scored) == sum(len(v) for v in files.values()) == 5
    assert figures.overall == 1.0  # the longer answer wins every pair and best-of-N here
    multi = next(e for e in data.examples if e.id == "p-1")
    assert [m["role"] for m in multi.prompt] == ["user", "assistant", "user"]


# ---------------------------------------------------------------------- process benchmarks


class StepLengths:
    """The stand-in process reward model: a step is valid (P = 0.9) unless it mentions 'wrong'."""

    threshold = 0.5

    def step_probabilities(self, items):
        return [[0.1 if "wrong" in step else 0.9 for step in steps] for _, steps in items]


def process_figures(kind_name: str, path: Path):
    kind, data = load(kind_name, path)
    rows = kind.scored_rows(StepLengths(), data)
    return data, rows, kind.score(rows)


def prmbench_row(idx: str, classification: str, steps: list[str], errors: list[int], **extra) -> dict:
    return {
        "original_question": f"Q {idx}",
        "modified_question": f"Q {idx} (modified)",
        "original_process": ["step one", "step two"],
        "modified_process": steps,
        "modified_steps": errors,
        "error_steps": errors,
        "reason": "made up",
        **extra,
        "idx": idx,
        "question": f"Q {idx}",
        "classification": classification,
    }


def test_prmbench_released_files(tmp_path):
    """github ssmisya/PRMBench `mr_eval/tasks/prmtest_classified/data/*.jsonl`: redundancy rows (each adds
    the official synthetic correct sample), multi_solutions rows with ground_truth and original_response,
    an idx repeated (scored once), error steps past the end of modified_process."""
    rows = [
        prmbench_row("1", "redundency", ["fine", "a wrong detour", "fine"], [2]),
        prmbench_row("2", "circular", ["fine", "wrong again"], [2, 5]),  # step 5 is past the end
        prmbench_row("3", "multi_solutions", ["fine", "fine"], [], ground_truth="29", original_response="..."),
        prmbench_row("3", "multi_solutions", ["fine"], [], ground_truth="29", original_response="..."),  # repeat
        prmbench_row("4", "step_contradiction", ["wrong", "fine"], [1]),
    ]
    path = tmp_path / "prm800k_test_p1_4o_redundency.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data, scored, figures = process_figures("prmbench", path)
    # one example per distinct (class, idx), plus a correct sample per redundancy row
    assert [(e.subset, e.id) for e in data.examples] == [
        ("redundancy", "1"), ("correct", "correct_1"), ("circular", "2"), ("multi_solutions", "3"),
        ("step_contradiction", "4"),
    ]  # fmt: skip
    assert any("repeat" in n for n in data.notes) and any("past the end" in n for n in data.notes)
    assert [r["step_labels"] for r in scored][:3] == [[1, 0, 1], [1, 1], [1, 0]]
    assert figures.overall == 1.0  # the stand-in flags exactly the error steps


def test_processbench_released_splits(tmp_path):
    """hub Qwen/ProcessBench: the four splits' rows in one file, ids `<split>-<n>`, generator,
    final_answer_correct, label -1 (no error) or the first wrong step."""
    rows = []
    for split in ("gsm8k", "math", "olympiadbench", "omnimath"):
        rows.append({"id": f"{split}-0", "generator": "Qwen2-7B-Instruct", "problem": "P", "steps": ["ok", "wrong"],
                     "final_answer_correct": False, "label": 1})  # fmt: skip
        rows.append({"id": f"{split}-1", "generator": "Llama-3.1-8B-Instruct", "problem": "P", "steps": ["ok"],
                     "final_answer_correct": True, "label": -1})  # fmt: skip
    path = tmp_path / "processbench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data, scored, figures = process_figures("processbench", path)
    assert [e.id for e in data.examples] == [r["id"] for r in rows] and not data.notes
    assert figures.counts == {"gsm8k": 2, "math": 2, "olympiadbench": 2, "omnimath": 2}
    assert [r["prediction"] for r in scored] == [r["label"] for r in rows] and figures.overall == 1.0


# ---------------------------------------------------------------------- Multimodal RewardBench


def test_multimodal_rewardbench_released_file(tmp_path):
    """github facebookresearch/multimodal_rewardbench `data/all_data.json`: a JSON list; `Image` relative
    to the file's folder (JPEGs under images/<source>/); categories with a slash; text then image."""
    from PIL import Image

    items = [
        ("nocaps_13062", "open_generation/correctness_task", "Output2"),
        ("visitbench_4", "open_generation/preference_task", "Output1"),
        ("mmmu-v_12", "knowledge", "Output2"),
        ("mathvista_101", "reasoning", "Output1"),
        ("EMMA-Coding_5_2", "reasoning", "Output2"),
        ("pairs_33", "safety", "Output1"),
        ("hatefulmemes_7", "safety", "Output2"),
        ("realworldqa_9", "vqa", "Output1"),
    ]
    rows = []
    for k, (ident, category, better) in enumerate(items):
        image = f"images/{ident.rsplit('_', 1)[0]}/{k}.jpg"
        (tmp_path / image).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (24, 16), COLOURS[k % len(COLOURS)]).save(tmp_path / image, format="JPEG")
        rows.append({"ID": ident, "Text": f"Question {k}?", "Image": image, "Output1": "one " * (k + 1),
                     "Output2": "two " * (8 - k), "Better": better, "Category": category})  # fmt: skip
    path = tmp_path / "all_data.json"
    path.write_text(json.dumps(rows, indent=2))
    data, scored, figures, _ = reward_figures("multimodal_rewardbench", path)
    assert [e.id for e in data.examples] == [i for i, *_ in items]
    assert sum(figures.counts.values()) == len(rows)
    assert {"safety/bias", "safety/toxicity", "reasoning/math", "reasoning/coding"} <= set(figures.counts)
    assert all([p["type"] for p in e.prompt[0]["content"]] == ["text", "image"] for e in data.examples)


# ---------------------------------------------------------------------- Long-RewardBench


def test_long_rewardbench_released_folder(tmp_path):
    """hub LCM-Lab/LongRewardBench (code github LCM-Lab/Long-RM `evaluate/evaluating/longreward_bench/`):
    one JSON Lines file per task, named for it; PairWise rows with chosen/rejected, BestOfN rows with
    candidates best first (their chosen/rejected null), the card's other keys; a multi-message
    prompt_template; ids repeat across task files."""
    system = {"role": "system", "content": "You are a helpful assistant."}

    def row(k: int, tasktype: str, length: str, subtype: str, **answers) -> dict:
        return {"id": k, "prompt_template": [system, {"role": "user", "content": f"<doc>{'x ' * 50}</doc>\nQ{k}?"}],
                "question": f"Q{k}?", "source": "LongBench", "chosen": None, "rejected": None, "subtask": "single_doc_qa",
                "chosen_model": None, "rejected_model": None, "ctx_length_for_length": length,
                "ctx_length_for_words": length, "length": 7321, "words_count": 5210, "task": "LongQA",
                "tasktype": tasktype, "subtype": subtype, "candidates_model": None, "candidates": None,
                "candidates_score": None, **answers}  # fmt: skip

    files = {
        "LongQA": [
            row(0, "PairWise", "8k", "same", chosen="A long, grounded answer.", rejected="No."),
            row(1, "PairWise", "128k", "diff", chosen="Short.", rejected="A long answer that ignores the text."),
            row(
                2,
                "BestOfN",
                "32k",
                "3",
                candidates=["The best, longest one.", "Second best.", "3rd"],
                candidates_model=["a", "b", "c"],
                candidates_score=[9.0, 6.5, 2.0],
            ),  # fmt: skip
        ],
        "Safety": [row(0, "PairWise", "4k", "same", chosen="I won't help with that, because ...", rejected="Sure.")],
    }
    root = tmp_path / "LongRewardBench"
    root.mkdir()
    for task, rows in files.items():
        (root / f"{task}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    data, scored, figures, pairs = reward_figures("long_rewardbench", root)
    assert [e.id for e in data.examples] == ["LongQA-0", "LongQA-1", "LongQA-2", "Safety-0"]
    assert [len(e.responses) for e in data.examples] == [2, 2, 3, 2] and len(pairs) == 5
    assert [m["role"] for m in data.examples[0].prompt] == ["system", "user"]
    assert figures.counts == {"LongQA": 2, "Safety": 1, "Rank3": 1}
    assert set(figures.sections) == {"4k", "8k", "128k"} and len(scored) == 4


# ---------------------------------------------------------------------- benchmark files checked before the run

REPO = Path(__file__).resolve().parents[1]


def spec_with_benchmarks(folder: Path, benchmarks: str) -> Path:
    """The quickstart spec (its data by absolute path) with these eval.benchmarks lines."""
    text = (REPO / "specs" / "quickstart.yaml").read_text()
    text = text.replace("../rmspec/data/demo/", f"{REPO}/rmspec/data/demo/")
    head, _, _ = text.partition("\neval:\n")
    path = folder / "spec.yaml"
    path.write_text(head + "\neval:\n  benchmarks:\n" + benchmarks)
    return path


def benchmark_line(spec: Path, needle: str) -> int:
    return next(n for n, line in enumerate(spec.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_missing_and_malformed_benchmark_files_stop_validate_and_plan(tmp_path, command):
    """Before this, `validate` and `plan` passed and the run failed in its evaluation, after training."""
    (tmp_path / "broken.jsonl").write_text('{"question": "q", "response_A": "a"}\nnot json\n')
    (tmp_path / "narrow.jsonl").write_text('{"question": "q", "response_A": "a", "response_B": "b"}\n')
    (tmp_path / "good.jsonl").write_text(
        json.dumps({"question": "q", "response_A": "a", "response_B": "b", "label": "A>B", "source": "x"}) + "\n"
    )
    spec = spec_with_benchmarks(
        tmp_path,
        "    - kind: rewardbench\n      path: nowhere.jsonl\n"
        "    - kind: judgebench\n      path: broken.jsonl\n"
        "    - kind: judgebench\n      path: narrow.jsonl\n"
        "    - kind: judgebench\n      path: good.jsonl\n"
        "    - kind: rmb\n",
    )
    done = rmspec(command, str(spec), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "5 problems" not in out and "4 problems in the spec" in out  # good.jsonl passes
    assert f"spec.yaml:{benchmark_line(spec, 'nowhere.jsonl')}:" in out and "file not found: nowhere.jsonl" in out
    assert f"spec.yaml:{benchmark_line(spec, 'broken.jsonl')}:" in out and "broken.jsonl:2:" in out
    assert "narrow.jsonl lacks column(s) label, source" in out
    assert "eval.benchmarks.4" in out and "benchmark 'rmb' needs a file" in out
    assert "Traceback" not in out


def test_run_stops_before_the_run_directory_on_a_missing_benchmark_file(tmp_path):
    spec = spec_with_benchmarks(tmp_path, "    - kind: judgebench\n      path: gone.jsonl\n")
    done = rmspec("run", str(spec), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "file not found: gone.jsonl" in done.stdout + done.stderr
    assert not (tmp_path / "runs").exists()  # nothing trained, no run directory


def test_the_benchmark_file_check_is_light(tmp_path):
    """validate and plan import it: no torch, datasets or pyarrow (the light side's rule)."""
    import subprocess
    import sys

    (tmp_path / "b.jsonl").write_text('{"prompt": "p"}\n')
    spec = spec_with_benchmarks(tmp_path, "    - kind: rewardbench\n      path: b.jsonl\n")
    code = (
        "import sys\nfrom rmspec.spec import load_spec\nfrom rmspec.evaluate.file_check import benchmark_issues\n"
        f"issues = benchmark_issues(load_spec({str(spec)!r}))\n"
        "assert len(issues) == 1 and 'lacks column(s) chosen, rejected, subset' in issues[0].message, issues\n"
        "print(sorted(m for m in ('torch', 'datasets', 'pyarrow', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_prmbench_verbatim_released_rows():
    """Four released PRMBench lines (Apache-2.0, tests/fixtures/benchmarks/released/README.md): each
    redundancy row adds its correct sample, the repeated idx is scored once, the step past the end is
    counted in a note; the counts from the raw lines."""
    path = REPO / "tests" / "fixtures" / "benchmarks" / "released" / "prmbench_sample.jsonl"
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    data, scored, figures = process_figures("prmbench", path)
    distinct = {(r["classification"], r["idx"]) for r in raw}
    redundancy = sum(r["classification"] == "redundency" for r in raw)
    assert len(data.examples) == len(distinct) + redundancy == 5
    assert [len(e.responses) for e in data.examples if not e.id.startswith("correct_")] == [
        len(r["modified_process"]) for r in raw[:3]
    ]
    assert any("1 row(s) repeat" in n for n in data.notes) and any("1 row(s) name error steps" in n for n in data.notes)
    assert len(scored) == 5 and figures.counts["multi_solutions"] == 1
