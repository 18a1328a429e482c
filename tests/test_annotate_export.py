"""`annotate export`: tasks and label configs, the seeded A/B order, sources (spec or file), selection."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET

import pytest

from helpers.runs import write_pairs
from rmspec.annotate.select import quotas, select
from rmspec.annotate.source import Source
from rmspec.annotate.tasks import make_tasks, swaps

REPO_SPECS = __import__("pathlib").Path(__file__).resolve().parents[1] / "specs"


def test_swaps_are_balanced_and_seeded():
    for n in (1, 2, 7, 100):
        flags = swaps(n, 3)
        assert abs(sum(flags) - n / 2) <= 0.5 and flags == swaps(n, 3)
    assert swaps(100, 1) != swaps(100, 2)


def test_tasks_carry_swap_and_id_in_meta_and_data():
    items = [
        {"id": f"r{i}", "group": "g", "prompt": f"p{i}", "first": f"good{i}", "second": f"bad{i}", "label": "first"}
        for i in range(6)
    ]
    tasks = make_tasks(Source("pairwise", items), seed=0)
    for task, item in zip(tasks, items):
        d, m = task["data"], task["meta"]
        assert d["rmspec_id"] == m["rmspec_id"] == item["id"] and d["rmspec_swap"] == m["rmspec_swap"]
        shown = (d["response_b"], d["response_a"]) if d["rmspec_swap"] else (d["response_a"], d["response_b"])
        assert shown == (item["first"], item["second"]) and d["prompt"] == item["prompt"]


def test_conversation_prompt_is_shown_and_kept():
    convo = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "q"},
    ]
    (task,) = make_tasks(Source("pairwise", [{"id": "c", "prompt": convo, "first": "a", "second": "b", "label": None}]))
    assert (
        task["data"]["prompt"] == "user: hi\n\nassistant: hello\n\nuser: q" and task["data"]["rmspec_prompt"] == convo
    )
    assert "rmspec_label" not in task["data"]


def test_export_cli_from_a_file(tmp_path, cli):
    write_pairs(tmp_path / "pairs.jsonl", 9)
    done = cli("annotate", "export", tmp_path / "pairs.jsonl", "--out", tmp_path / "out", "--seed", "4")
    assert done.code == 0, done.err
    tasks = json.loads((tmp_path / "out" / "tasks.json").read_text())
    assert len(tasks) == 9 and sum(t["meta"]["rmspec_swap"] for t in tasks) in (4, 5)
    config = ET.fromstring((tmp_path / "out" / "label_config.xml").read_text())
    assert config.find("Pairwise").attrib == {"name": "pw", "toName": "a,b"}
    assert config.find("Choices/Choice").attrib["value"] == "tie"
    variables = {el.attrib["value"] for el in config.iter("Text")}
    assert variables == {"$prompt", "$response_a", "$response_b"} and all(v[1:] in tasks[0]["data"] for v in variables)


def test_export_cli_from_a_spec(tmp_path, cli):
    done = cli("annotate", "export", REPO_SPECS / "quickstart.yaml", "--out", tmp_path / "out")
    assert done.code == 0, done.err
    tasks = json.loads((tmp_path / "out" / "tasks.json").read_text())
    source = [
        json.loads(x) for x in (REPO_SPECS.parent / "rmspec/data/demo/preferences.jsonl").read_text().splitlines()
    ]
    assert len(tasks) == len(source)  # the demo data loses no row to the quickstart filters
    first = {t["data"]["rmspec_id"]: t for t in tasks}[source[0]["id"]]
    assert first["meta"]["group"] == source[0]["family"]


def test_pointwise_spec_exports_ratings_on_its_scale(tmp_path, cli):
    rows = [{"prompt": f"p{i}", "response": f"r{i}", "helpfulness": i % 5, "correctness": 4} for i in range(4)]
    (tmp_path / "hs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = tmp_path / "pw.yaml"
    spec.write_text("""version: 1
name: pw
model: {name_or_path: sentence-transformers/all-MiniLM-L6-v2}
data:
  source: {kind: files, paths: [hs.jsonl]}
  mapping: {preset: helpsteer2}
approach: {kind: pointwise, attributes: [helpfulness, correctness], scale: {min: 0, max: 4}}
hardware: {device: cpu}
""")
    done = cli("annotate", "export", spec, "--out", tmp_path / "out")
    assert done.code == 0, done.err
    config = ET.fromstring((tmp_path / "out" / "label_config.xml").read_text())
    ratings = {el.attrib["name"]: el.attrib["maxRating"] for el in config.iter("Rating")}
    assert ratings == {"helpfulness": "5", "correctness": "5"}
    tasks = json.loads((tmp_path / "out" / "tasks.json").read_text())
    assert tasks[0]["data"]["rmspec_attributes"] == ["helpfulness", "correctness"] and tasks[0]["data"][
        "rmspec_scale"
    ] == [0, 4]

    # Back in: stars -> the spec's scale (1 star = 0), two annotators averaged under majority.
    from rmspec.annotate.aggregate import aggregate
    from rmspec.annotate.exports import parse_export

    export = [
        {
            "id": 1,
            "data": tasks[0]["data"],
            "meta": tasks[0]["meta"],
            "annotations": [
                {
                    "id": 1,
                    "completed_by": 1,
                    "was_cancelled": False,
                    "result": [
                        {"from_name": "helpfulness", "value": {"rating": 5}},
                        {"from_name": "correctness", "value": {"rating": 2}},
                    ],
                },
                {
                    "id": 2,
                    "completed_by": 2,
                    "was_cancelled": False,
                    "result": [
                        {"from_name": "helpfulness", "value": {"rating": 4}},
                        {"from_name": "correctness", "value": {"rating": 2}},
                    ],
                },
                {
                    "id": 3,
                    "completed_by": 3,
                    "was_cancelled": False,
                    "result": [{"from_name": "helpfulness", "value": {"rating": 9}}],
                },
            ],
        }
    ]
    out = aggregate(parse_export(export))
    assert out.rows[0]["helpfulness"] == 3.5 and out.rows[0]["correctness"] == 1.0
    assert "whole number of stars from 1 to 5" in out.rejects[0]["detail"]


@pytest.mark.parametrize(
    "content, says",
    [
        ('{"prompt": "p", "chosen": "a"}\n', "rejected must be a non-empty string"),
        ('{"prompt": "p", "text": "a"}\n', "no chosen/rejected or response_a/response_b"),
        ('{"prompt": "p", "chosen": "a", "rejected": "b"}\nnot json\n', ":2: not valid JSON"),
    ],
)
def test_bad_source_rows_exit_2(tmp_path, cli, content, says):
    (tmp_path / "rows.jsonl").write_text(content)
    done = cli("annotate", "export", tmp_path / "rows.jsonl", "--out", tmp_path / "out")
    assert done.code == 2 and says in done.err and "rows.jsonl" in done.err and "Traceback" not in done.err


def test_select_uncertain_disagree_random_by_hand():
    items = [
        {"id": f"r{i}", "group": "ab"[i % 2], "prompt": "", "first": "x", "second": "y", "label": "first"}
        for i in range(6)
    ]
    scores = [(0.9, 0.0), (0.1, 0.2), (-2.0, 1.0), (0.5, 0.45), (3.0, -1.0), (0.0, 0.3)]  # margins .9 -.1 -3 .05 4 -.3
    assert [r["id"] for r in select(items, "uncertain", 3, scores=scores)] == ["r3", "r1", "r5"]
    assert [r["id"] for r in select(items, "disagree", 5, scores=scores)] == [
        "r2",
        "r5",
        "r1",
    ]  # only contradicted ones
    picked = select(items, "uncertain", 2, scores=scores, stratify="group")
    assert sorted(r["group"] for r in picked) == ["a", "b"] and [r["id"] for r in picked] == [
        "r3",
        "r0",
    ]  # r0: a's best
    rand = select(items, "random", 4, seed=1)
    assert len({r["id"] for r in rand}) == 4 and rand == select(items, "random", 4, seed=1)
    assert picked[0]["margin"] == pytest.approx(0.05) and picked[0]["rank"] == 1


def test_quotas_follow_group_sizes():
    assert quotas({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    assert quotas({"a": 1, "b": 100}, 10) == {"a": 1, "b": 9} or sum(quotas({"a": 1, "b": 100}, 10).values()) == 10
    rng = random.Random(0)
    for _ in range(50):
        sizes = {g: rng.randint(1, 40) for g in "abcde"}
        n = rng.randint(1, 120)
        q = quotas(sizes, n)
        assert sum(q.values()) == min(n, sum(sizes.values())) and all(q[g] <= sizes[g] for g in sizes)


def test_select_needs_a_model(tmp_path, cli):
    write_pairs(tmp_path / "pairs.jsonl", 4)
    done = cli(
        "annotate", "export", tmp_path / "pairs.jsonl", "--out", tmp_path / "o", "--select", "uncertain", "--n", "2"
    )
    assert done.code == 2 and "--model" in done.err
    ok = cli("annotate", "export", tmp_path / "pairs.jsonl", "--out", tmp_path / "o", "--select", "random", "--n", "2")
    assert ok.code == 0 and len(json.loads((tmp_path / "o" / "tasks.json").read_text())) == 2
    audit = [json.loads(x) for x in (tmp_path / "o" / "selection.jsonl").read_text().splitlines()]
    assert [a["rank"] for a in audit] == [1, 2] and all(a["criterion"] == "random" for a in audit)


@pytest.mark.slow
def test_select_uncertain_with_a_model_matches_the_engine(tmp_path, cli):
    """--select uncertain picks the smallest |margin| as rmspec.inference scores them."""
    from transformers import AutoModelForSequenceClassification

    from helpers.models import build_model
    from rmspec.inference.engine import RewardEngine

    model = build_model("llama", tmp_path / "m")
    # Save a score head, so every load scores alike (a missing head is initialised at random).
    AutoModelForSequenceClassification.from_pretrained(model, num_labels=1).save_pretrained(model)
    write_pairs(tmp_path / "pairs.jsonl", 20)
    done = cli(
        "annotate",
        "export",
        tmp_path / "pairs.jsonl",
        "--out",
        tmp_path / "o",
        "--select",
        "uncertain",
        "--n",
        "5",
        "--model",
        model,
    )
    assert done.code == 0, done.err
    rows = [json.loads(x) for x in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    engine = RewardEngine.load(model)
    a, b = engine.score_pairs([r["prompt"] for r in rows], [r["chosen"] for r in rows], [r["rejected"] for r in rows])
    expected = [rows[i]["id"] for i in sorted(range(20), key=lambda i: (abs(a[i] - b[i]), i))[:5]]
    audit = [json.loads(x) for x in (tmp_path / "o" / "selection.jsonl").read_text().splitlines()]
    assert [x["id"] for x in audit] == expected
    assert [t["meta"]["rmspec_selection"]["rank"] for t in json.loads((tmp_path / "o" / "tasks.json").read_text())] == [
        1,
        2,
        3,
        4,
        5,
    ]


def test_stratify_by_a_column_of_the_rows(tmp_path, cli):
    rows = [{"id": f"r{i}", "prompt": "p", "chosen": "a", "rejected": "b", "subset": "xy"[i < 6]} for i in range(10)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = cli(
        "annotate",
        "export",
        tmp_path / "rows.jsonl",
        "--out",
        tmp_path / "o",
        "--select",
        "random",
        "--n",
        "5",
        "--stratify",
        "subset",
    )
    assert done.code == 0, done.err
    audit = [json.loads(x) for x in (tmp_path / "o" / "selection.jsonl").read_text().splitlines()]
    assert sorted(a["stratum"] for a in audit) == ["x", "x", "y", "y", "y"]  # 4 of 10 are x, 6 are y
    bad = cli(
        "annotate",
        "export",
        tmp_path / "rows.jsonl",
        "--out",
        tmp_path / "o",
        "--select",
        "random",
        "--n",
        "5",
        "--stratify",
        "language",
    )
    assert bad.code == 2 and "no column 'language'" in bad.err
