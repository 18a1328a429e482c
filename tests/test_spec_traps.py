"""Spec traps: a spec means what a user would think it means, and where a refusal is the right answer
the error says exactly what to write."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.ci import need
from rmspec.errors import SpecError
from rmspec.spec import load_spec
from rmspec.spec.root import Spec

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, **sections) -> Path:
    (tmp_path / "d.jsonl").write_text(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n")
    doc = {
        "version": 1,
        "name": "t",
        "model": {"name_or_path": "sentence-transformers/all-MiniLM-L6-v2"},
        "data": {"source": {"kind": "files", "paths": ["d.jsonl"]}, "mapping": {"preset": "pairs"}},
        "approach": {"kind": "bradley_terry"},
        "hardware": {"device": "cpu"},
    }
    for key, value in sections.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(doc))
    return path


def problems(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value) + " " + " ".join(str(getattr(i, "hint", "")) for i in getattr(info.value, "issues", []))


# ---------------------------------------------------------------- split


def test_validation_source_alone_turns_the_fraction_off(tmp_path):
    path = write(
        tmp_path,
        data={
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "pairs"},
            "split": {"validation_source": {"kind": "files", "paths": ["d.jsonl"]}},
        },
    )
    split = load_spec(path).spec.data.split
    assert split.validation_source is not None and split.validation_fraction is None


def test_both_split_ways_written_is_refused_saying_which_to_delete(tmp_path):
    path = write(
        tmp_path,
        data={
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "pairs"},
            "split": {"validation_fraction": 0.1, "validation_source": {"kind": "files", "paths": ["d.jsonl"]}},
        },
    )
    text = problems(path)
    assert "validation_fraction" in text and "delete" in text


# ---------------------------------------------------------------- early stopping


@pytest.mark.parametrize(
    ("approach", "expected"),
    [
        ({"kind": "process"}, "eval/rm/first_error_accuracy"),
        ({"kind": "generative"}, "eval/sft/loss"),
    ],
)
def test_early_stopping_metric_the_approach_never_produces(tmp_path, approach, expected):
    data = {
        "source": {"kind": "files", "paths": ["d.jsonl"]},
        "mapping": {"preset": "stepwise" if approach["kind"] == "process" else "messages"},
        "split": {"validation_fraction": 0.1},
    }
    path = write(
        tmp_path,
        data=data,
        approach=approach,
        model={"name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"},
        training={"eval_steps": 10, "early_stopping": {}},
    )
    text = problems(path)
    assert "eval/rm/accuracy" in text and expected in text
    # what the message says to write is accepted
    mode = "min" if expected.endswith("loss") else "max"
    path = write(
        tmp_path,
        data=data,
        approach=approach,
        model={"name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"},
        training={"eval_steps": 10, "early_stopping": {"metric": expected, "mode": mode}},
    )
    assert load_spec(path).spec.training.early_stopping.metric == expected


# ---------------------------------------------------------------- pairs_from_scores


def test_pairs_from_scores_reads_the_mapped_score_columns(tmp_path):
    need("datasets")
    from helpers.data import bert_tokenizer, make_spec, write_jsonl
    from rmspec.data import prepare

    rows = [
        {"prompt": "q", "chosen": "best", "rejected": "worst", "good": 9.0, "bad": 1.0},
        {"prompt": "q", "chosen": "fine", "rejected": "meh", "good": 7.0, "bad": 4.0},
    ]
    write_jsonl(tmp_path / "d.jsonl", rows)
    loaded = make_spec(
        tmp_path,
        {
            "source": {"kind": "files", "paths": ["d.jsonl"]},
            "mapping": {"preset": "pairs", "columns": {"score_chosen": "good", "score_rejected": "bad"}},
            "augment": [{"kind": "pairs_from_scores", "min_gap": 2.0}],
        },
    )
    prepared = prepare(loaded, bert_tokenizer(), cache_dir=tmp_path / "c")
    made = {(r["chosen"], r["rejected"]) for r in prepared.train if r["augmented"]}
    scores = {"best": 9, "fine": 7, "meh": 4, "worst": 1}
    expected = {(a, b) for a in scores for b in scores if scores[a] - scores[b] >= 2}
    expected -= {("best", "worst"), ("fine", "meh")}
    assert made == expected


def test_pairs_from_scores_hint_names_column_keys_that_exist():
    from rmspec.spec.data import ColumnMap

    hint_keys = {"score_chosen", "score_rejected"}
    assert hint_keys <= set(ColumnMap.model_fields)
    source = (REPO / "rmspec" / "data" / "augment.py").read_text()
    for key in re.findall(r"columns\.(\w+)", source):
        assert key in ColumnMap.model_fields, key


# ---------------------------------------------------------------- descriptions and docs


def test_descriptions_say_what_is_true():
    approach = Spec.model_fields["approach"].description
    for kind in ("bradley_terry", "pointwise", "generative", "process"):
        assert kind in approach
    from rmspec.spec.training import TrainingSpec

    seed = TrainingSpec.model_fields["seed"].description
    assert "dropout" not in seed or "dropout is always off" in seed, seed  # it seeds no dropout: there is none


def test_readme_stratify_line_and_abridged_spec():
    """The README and the pages it links (docs/spec.md holds the abridged spec that was the README's)."""
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(page.read_text() for page in docs)
    for line in text.splitlines():
        if "stratify_by" in line:
            assert "no leakage" not in line, line
    # wherever the docs' YAML stratifies by group, the same block maps the group column
    grouped = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if "stratify_by: group" in b]
    assert grouped, "no YAML block in the README or docs/ stratifies by group: the abridged spec moved?"
    for block in grouped:
        assert re.search(r"group:\s*\w", block), block


def test_architecture_links_stay_inside_the_repository():
    text = (REPO / "docs" / "architecture.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (REPO / "docs" / target).resolve()
        assert resolved.is_relative_to(REPO), target
        assert resolved.exists(), target


def test_settings_that_would_do_nothing_are_refused(tmp_path):
    """A tracker's settings without that tracker in backends, or a stopping strategy without a weighted
    mixture, would be accepted and ignored: each is an error saying what to write."""
    tracker = problems(write(tmp_path, tracking={"backends": ["tensorboard"], "wandb": {"project": "x"}}))
    assert "add wandb to tracking.backends, or delete tracking.wandb" in tracker
    path = write(tmp_path, tracking={"backends": ["wandb"], "wandb": {"project": "x"}})
    assert load_spec(path).spec.tracking.wandb.project == "x"
    data = {"source": {"kind": "files", "paths": ["d.jsonl"]}, "mapping": {"preset": "pairs"}}
    strategy = problems(write(tmp_path, data={**data, "stopping_strategy": "all_exhausted"}))
    assert "data.stopping_strategy sizes a weighted mixture" in strategy
