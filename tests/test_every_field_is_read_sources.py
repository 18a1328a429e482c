"""The data side of the field walker: every entry of tests/helpers/fields_sources.py changes what the data stage
gives the user (report, rows, rejects, or the error it stops with) or the calls rmspec makes to the library
that reads the source. All inputs are local and small: JSON Lines files, a local dataset folder read through
the hub code path (datasets.load_dataset, offline), save_to_disk folders, real SQLite files, and a custom
source registered through a real entry point. Nothing reaches the network: a server URL is answered by a
stand-in SQLite file, after its create_engine call is recorded."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys

import pytest

from helpers import fields_sources
from helpers.ci import need
from helpers.data import chat_tokenizer, write_jsonl
from helpers.echoes import data_report_without_echoes

need("transformers")

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
BEFORE_REFUSED = {"FilesSource.format"}  # auto cannot tell a .data file's format: the data stage stops, says so


def _pairs() -> list[dict]:
    rows = [
        {
            "id": f"r{i}",
            "uid": f"u{i}",
            "prompt": f"question {i} about rivers",
            "alt_prompt": f"another question {i}",
            "chosen": f"a good long answer {i} about water and rivers",
            "rejected": f"bad {i}",
            "alt_chosen": f"alt good {i}",
            "alt_rejected": f"alt bad {i}",
            "m": 1.0 + i,
            "m2": 0.5,
            "score_chosen": 4.0 + i % 3,  # gaps 1, 2, 3 over score_rejected
            "score_rejected": 3.0,
            "sc2": 5.0,  # every gap over score_rejected 2.0: all pass min_score_gap 1.5, where the gaps of 1 do not
            "sr2": 1.0,
            "is_tie": i == 5,
        }
        for i in range(6)
    ]
    same_prompt = {**rows[0], "id": "r6", "uid": "u6", "chosen": "another answer 0", "rejected": "worse 0"}
    rows.append({**same_prompt, "score_chosen": 4.0, "score_rejected": 1.0})  # dedup on prompt, pairs_from_scores
    rows.append({**rows[1], "id": "r7", "uid": "u7", "prompt": "q7", "chosen": "same", "rejected": "same"})
    rows.append({**rows[2], "id": "r8", "uid": "u8", "prompt": "q8", "rejected": " "})  # drop_empty
    return rows


def _simple(tag: str, n: int) -> list[dict]:
    return [
        {"prompt": f"{tag} question {i}", "chosen": f"{tag} good {i}", "rejected": f"{tag} bad {i}"} for i in range(n)
    ]


def _sqlite(path, rows: list[dict]) -> None:
    cols = list(rows[0])
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE pairs ({', '.join(cols)})")
        db.executemany(f"INSERT INTO pairs VALUES ({', '.join('?' * len(cols))})", [list(r.values()) for r in rows])


def _data_files(d) -> None:
    import datasets

    pairs, a, b = _pairs(), _simple("hub a", 6), _simple("hub b", 6)
    write_jsonl(d / "pairs.jsonl", pairs)
    shutil.copy(d / "pairs.jsonl", d / "pairs.data")
    (d / "pairsdir").mkdir()
    shutil.copy(d / "pairs.jsonl", d / "pairsdir" / "train.jsonl")
    latin = "".join(
        json.dumps({**r, "prompt": r["prompt"] + (" café" if i % 2 else "")}, ensure_ascii=False) + "\n"
        for i, r in enumerate(_simple("enc", 4))
    )
    (d / "latin1.jsonl").write_bytes(latin.encode("latin-1"))
    for folder in ("hub", "hubcfg"):
        for tag, rows in (("a", a), ("b", b)):
            (d / folder / tag).mkdir(parents=True)
            write_jsonl(d / folder / tag / "train.jsonl", rows)
    write_jsonl(d / "hub" / "a" / "test.jsonl", _simple("hub a test", 3))
    (d / "hubcfg" / "README.md").write_text(
        "---\nconfigs:\n- config_name: first\n  data_files: a/train.jsonl\n"
        "- config_name: second\n  data_files: b/train.jsonl\n---\n"
    )
    datasets.Dataset.from_list(pairs).save_to_disk(str(d / "pairs_saved"))
    test = datasets.Dataset.from_list(_simple("hub a test", 3))
    datasets.DatasetDict(train=datasets.Dataset.from_list(a), test=test).save_to_disk(str(d / "saved_dd"))
    datasets.DatasetDict(train=datasets.Dataset.from_list(b)).save_to_disk(str(d / "saved_b"))
    for name, rows in (("a", a), ("b", b), ("prefs", a), ("other", b), ("pairs", pairs)):
        _sqlite(d / f"{name}.db", rows)
    hh = [
        {
            "prompt": f"q{i}",
            "chosen": f"\n\nHuman: q{i}\n\nAssistant: yes {i}",
            "rejected": f"\n\nHuman: q{i}\n\nAssistant: no",
        }
        for i in range(4)
    ]
    write_jsonl(d / "hh.jsonl", hh)
    comps = [{"response": f"answer {k}", "overall_score": s} for k, s in enumerate((8, 5, 2))]
    write_jsonl(d / "ultrafeedback.jsonl", [{"instruction": f"task {i}", "completions": comps} for i in range(4)])
    helpsteer = [
        {"prompt": f"ask {p}", "response": f"reply {p} {k}", "alt_response": f"other reply {p} {k}",
         "helpfulness": 4 - 3 * k, "correctness": 1 + 3 * k, "coherence": 2, "complexity": 2, "verbosity": 2,
         "h2": 2 + k}
        for p in range(3) for k in range(2)
    ]  # fmt: skip
    write_jsonl(d / "helpsteer.jsonl", helpsteer)
    ranked = [
        {"prompt": f"rank {i}", "responses": ["x one", "x two", "x three"], "scores": [3, 2, 1],
         "alt_responses": ["y one", "y two", "y three"], "alt_scores": [1, 2, 3]}
        for i in range(4)
    ]  # fmt: skip
    write_jsonl(d / "ranked.jsonl", ranked)
    steps = [
        {"prompt": f"sum {i}", "completions": ["step one", "step two"], "labels": [True, False],
         "alt_completions": ["first", "second"], "alt_labels": [False, True]}
        for i in range(4)
    ]  # fmt: skip
    write_jsonl(d / "steps.jsonl", steps)
    chat = [
        {"messages": [{"role": "user", "content": f"judge {i}"}, {"role": "assistant", "content": "[[A]]"}],
         "alt_messages": [{"role": "user", "content": f"rate {i}"}, {"role": "assistant", "content": "[[B]]"}]}
        for i in range(4)
    ]  # fmt: skip
    write_jsonl(d / "messages.jsonl", chat)
    corpus = [json.dumps(r) for r in pairs + chat]
    chat_tokenizer(corpus).save_pretrained(str(d / "chat_model"))


def _scenarios(d) -> dict[str, dict]:
    """Base specs (model, data, approach) each entry's override applies to."""
    files = lambda name: {"kind": "files", "paths": [name]}  # noqa: E731
    pairs = {"source": files("pairs.jsonl"), "mapping": {"preset": "pairs"}}
    mix = [{"name": n, "source": files(f"hub/{n}/train.jsonl"), "mapping": {"preset": "pairs"}} for n in "ab"]
    chat = str(d / "chat_model")
    bt = {"kind": "bradley_terry"}
    return {
        "pairs": (MINILM, pairs, bt),
        "hub": (MINILM, {"source": {"kind": "huggingface", "path": "hub/a"}, "mapping": {"preset": "pairs"}}, bt),
        "disk": (MINILM, {"source": {"kind": "disk", "path": "saved_dd", "split": "train"}, "mapping": {"preset": "pairs"}}, bt),
        "sql": (MINILM, {"source": {"kind": "sql", "sqlite": "a.db", "query": "SELECT * FROM pairs"}, "mapping": {"preset": "pairs"}}, bt),
        "mix": (MINILM, {"sources": mix}, bt),
        "chat": (chat, pairs, bt),
        "ultrafeedback": (MINILM, {"source": files("ultrafeedback.jsonl"), "mapping": {"preset": "ultrafeedback"}}, bt),
        "helpsteer2": (MINILM, {"source": files("helpsteer.jsonl"), "mapping": {"preset": "helpsteer2", "pair_by": "helpfulness"}}, bt),
        "pointwise": (
            MINILM,
            {"source": files("helpsteer.jsonl"),
             "mapping": {"columns": {"prompt": "prompt", "response": "response", "scores": {"helpfulness": "helpfulness"}}}},
            {"kind": "pointwise", "attributes": ["helpfulness"]},
        ),
        "listwise": (MINILM, {"source": files("ranked.jsonl"), "mapping": {"preset": "ranked"}}, {"kind": "listwise"}),
        "process": (MINILM, {"source": files("steps.jsonl"), "mapping": {"preset": "stepwise"}}, {"kind": "process", "step_separator": " |"}),
        "generative": (chat, {"source": files("messages.jsonl"), "mapping": {"preset": "messages"}}, {"kind": "generative"}),
    }  # fmt: skip


TINY_SOURCE = """import datasets
def make(options, base_dir):
    n = options.get("n", 3)
    return datasets.Dataset.from_list([{"prompt": f"custom {i}", "chosen": "y", "rejected": "n"} for i in range(n)])
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The data files, one spec per scenario, a custom source `fwtiny` registered through a real entry point,
    the environment variables the token_env and password_env entries name, and a private datasets cache."""
    import datasets

    d = tmp_path_factory.mktemp("fields_sources")
    _data_files(d)
    for name, (model, data, approach) in _scenarios(d).items():
        doc = {
            "version": 1,
            "name": name,
            "model": {"name_or_path": model},
            "data": data,
            "approach": approach,
            "training": {"max_length": 64, "global_batch_size": 4},
            "hardware": {"device": "cpu"},
        }
        (d / f"{name}.yaml").write_text(json.dumps(doc, indent=1))
    info = d / "site" / "fwtiny_pkg-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fwtiny-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rmspec.sources]\nfwtiny = fwtiny:make\n")
    (d / "site" / "fwtiny.py").write_text(TINY_SOURCE)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(d / "site"))
        mp.setenv("FW_HUB_TOKEN", "hub-token-for-the-test")
        mp.setenv("FW_DB_PASSWORD", "db-password-for-the-test")
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", str(d / "hf-cache"))
        yield d
    sys.modules.pop("fwtiny", None)


def _recorded(calls: list, name: str, real, swap=None):
    """`real`, with each call appended to `calls` (name, args, kwargs) as rmspec made it; `swap` may change the
    arguments passed on (a server URL -> its stand-in SQLite file)."""

    def call(*args, **kwargs):
        made = json.dumps([name, [str(a) for a in args], {k: str(v) for k, v in sorted(kwargs.items())}])
        if made not in calls:  # once each: whether `datasets` reran a generator or used its cache is noise
            calls.append(made)
        return real(*(swap(*args) if swap else args), **kwargs)

    return call


_SEEN: dict[tuple, dict] = {}  # artifacts by (scenario, sets): a base shared by several entries is made once


def _artifact(world, scenario: str, sets: list[str]) -> dict:
    """The data stage's output for the scenario's spec with `sets`, and the source-reading calls it made."""
    key = (scenario, tuple(sets))
    if key in _SEEN:
        return _SEEN[key]
    import datasets
    import sqlalchemy
    from sqlalchemy.engine import make_url

    from rmspec.data.pipeline import prepare
    from rmspec.data.tokenizer import load_tokenizer
    from rmspec.errors import DataError
    from rmspec.spec import load_spec

    def stand_in(url):  # a server's database -> the SQLite file of that name
        return (url,) if str(url).startswith("sqlite") else (f"sqlite:///{world / make_url(url).database}.db",)

    calls: list = []
    n = len(list(world.glob("out*")))
    out = world / f"out{n}"  # a fresh cache and rejects file: nothing is reused
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets, "load_dataset", _recorded(calls, "load_dataset", datasets.load_dataset))
        mp.setattr(datasets, "load_from_disk", _recorded(calls, "load_from_disk", datasets.load_from_disk))
        mp.setattr(sqlalchemy, "create_engine", _recorded(calls, "create_engine", sqlalchemy.create_engine, stand_in))
        loaded = load_spec(world / f"{scenario}.yaml", sets)
        try:
            prepared = prepare(
                loaded, load_tokenizer(loaded), cache_dir=out / "cache", rejects_path=out / "rejects.jsonl"
            )
        except DataError as exc:
            result = {"calls": calls, "error": exc.message}
        else:
            result = {
                "calls": calls,
                "report": data_report_without_echoes(prepared.report.to_json()),
                "train": prepared.train.to_list(),
                "validation": prepared.validation.to_list() if prepared.validation is not None else None,
                "rejects": (out / "rejects.jsonl").read_text(),
            }
    _SEEN[key] = result
    return result


@pytest.mark.parametrize("field", sorted(fields_sources.EFFECTS))
def test_field_changes_the_data_or_the_source_call(field, world):
    override, scenario = fields_sources.EFFECTS[field]
    *setup, last = override.split(";")  # "a;b": a in both, b only in the changed spec
    before, after = _artifact(world, scenario, setup), _artifact(world, scenario, [*setup, last])
    assert "error" not in after, f"{override}: {after['error']}"
    assert ("error" in before) == (field in BEFORE_REFUSED), f"{setup}: {before.get('error')}"
    assert before != after, f"{override} changed nothing in the data or the source calls"


@pytest.mark.parametrize(
    ("scenario", "sets", "refusal"),
    [
        # a split on a folder saved from one Dataset was read whole, the split ignored
        (
            "disk",
            ["data.source.path=pairs_saved", "data.source.split=null", "data.source.split=test"],
            "data.source.split: .* holds one dataset",
        ),
    ],
)
def test_a_source_field_that_could_do_nothing_is_refused(scenario, sets, refusal, world):
    import re

    assert re.search(refusal, _artifact(world, scenario, sets)["error"])
    assert "error" not in _artifact(world, scenario, sets[:-1])  # without that field the same source reads


def test_password_env_next_to_an_sqlite_file_is_refused_by_the_spec(world):
    """password_env next to an SQLite file was never read: `rmspec validate` refuses it, saying what to do."""
    from rmspec.errors import SpecError
    from rmspec.spec import load_spec

    with pytest.raises(SpecError) as refused:
        load_spec(world / "sql.yaml", ["data.source.password_env=FW_DB_PASSWORD"])
    assert "data.source" in str(refused.value) and "remove password_env" in str(refused.value)
    load_spec(world / "sql.yaml", [])  # the same source without it loads
