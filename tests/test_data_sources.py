"""Every source kind on local data: files (jsonl, json, parquet, csv, globs), disk, the hub code path
on a local copy, SQL on a real SQLite file, custom kinds through a real entry point; limit; errors."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest

from helpers.data import make_spec, write_jsonl
from rmspec.data import load_canonical
from rmspec.errors import DataError

ROWS = [{"prompt": f"p{i}", "chosen": f"good {i}", "rejected": f"bad {i}"} for i in range(6)]


def ids(ds):
    return [r["prompt_messages"][0]["content"] for r in ds]


def run(tmp_path, source, **kw):
    loaded = make_spec(tmp_path, {"source": source, "mapping": {"preset": "pairs"}})
    return load_canonical(loaded, **kw)


def test_files_formats_and_globs(tmp_path):
    import pandas as pd

    (tmp_path / "d").mkdir()
    write_jsonl(tmp_path / "d" / "a.jsonl", ROWS[:3])
    write_jsonl(tmp_path / "d" / "b.jsonl", ROWS[3:])
    ds, report = run(tmp_path, {"kind": "files", "paths": ["d/*.jsonl"]})
    assert ids(ds) == [r["prompt"] for r in ROWS] and report.rows_read == 6
    (tmp_path / "x.json").write_text(json.dumps(ROWS))
    assert ids(run(tmp_path, {"kind": "files", "paths": ["x.json"]})[0]) == [r["prompt"] for r in ROWS]
    pd.DataFrame(ROWS).to_parquet(tmp_path / "x.parquet")
    assert ids(run(tmp_path, {"kind": "files", "paths": ["x.parquet"]})[0]) == [r["prompt"] for r in ROWS]
    pd.DataFrame(ROWS).to_csv(tmp_path / "x.csv", index=False)
    assert ids(run(tmp_path, {"kind": "files", "paths": ["x.csv"]})[0]) == [r["prompt"] for r in ROWS]


def test_limit_from_spec_and_caller(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", ROWS)
    ds, report = run(tmp_path, {"kind": "files", "paths": ["a.jsonl"], "limit": 4})
    assert len(ds) == 4 and report.rows_read == 4
    ds, _ = run(tmp_path, {"kind": "files", "paths": ["a.jsonl"], "limit": 4}, limit=2)
    assert ids(ds) == ["p0", "p1"]


def test_missing_file_says_where(tmp_path):
    with pytest.raises(DataError) as err:
        run(tmp_path, {"kind": "files", "paths": ["nope/*.jsonl"]})
    assert "data.source.paths[0]" in err.value.message and err.value.hint


def test_unknown_extension(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(DataError, match="cannot tell the file format"):
        run(tmp_path, {"kind": "files", "paths": ["a.txt"]})


def test_disk(tmp_path):
    import datasets

    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "saved"))
    ds, _ = run(tmp_path, {"kind": "disk", "path": "saved"})
    assert ids(ds) == [r["prompt"] for r in ROWS]
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS[:2]), "test": datasets.Dataset.from_list(ROWS[2:])}
    ).save_to_disk(str(tmp_path / "dd"))
    assert ids(run(tmp_path, {"kind": "disk", "path": "dd", "split": "test"})[0]) == ["p2", "p3", "p4", "p5"]
    with pytest.raises(DataError, match="several splits"):
        run(tmp_path, {"kind": "disk", "path": "dd"})


def test_huggingface_code_path_on_a_local_copy(tmp_path):
    """A hub-layout folder (data/<split>-*.jsonl) loads through kind: huggingface, split and all."""
    (tmp_path / "repo" / "data").mkdir(parents=True)
    write_jsonl(tmp_path / "repo" / "data" / "train-00000.jsonl", ROWS[:4])
    write_jsonl(tmp_path / "repo" / "data" / "test-00000.jsonl", ROWS[4:])
    ds, _ = run(tmp_path, {"kind": "huggingface", "path": "repo", "split": "test"})
    assert ids(ds) == ["p4", "p5"]
    # streaming goes through the IterableDataset path and is materialised in batches
    ds, report = run(tmp_path, {"kind": "huggingface", "path": "repo", "split": "train", "streaming": True})
    assert ids(ds) == ["p0", "p1", "p2", "p3"] and report.rows_read == 4 and report.reconciled


def test_huggingface_token_env_must_be_set(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    with pytest.raises(DataError, match="NO_SUCH_TOKEN_VAR"):
        run(tmp_path, {"kind": "huggingface", "path": "org/gated", "token_env": "NO_SUCH_TOKEN_VAR"})


def test_huggingface_offline_hint(tmp_path):
    with pytest.raises(DataError) as err:
        run(tmp_path, {"kind": "huggingface", "path": "Anthropic/hh-rlhf"})
    assert "kind: disk" in err.value.hint or "dataset id" in err.value.hint


def _sqlite(path, rows):
    con = sqlite3.connect(path)
    con.execute("create table prefs (prompt text, chosen text, rejected text, source text)")
    con.executemany(
        "insert into prefs values (?, ?, ?, ?)", [(r["prompt"], r["chosen"], r["rejected"], "s") for r in rows]
    )
    con.commit()
    con.close()


def test_sql_on_a_real_sqlite_file(tmp_path):
    _sqlite(tmp_path / "prefs.db", ROWS)
    ds, report = run(
        tmp_path,
        {
            "kind": "sql",
            "sqlite": "prefs.db",
            "query": "select prompt, chosen, rejected from prefs where prompt != 'p0' order by prompt",
        },
    )
    assert ids(ds) == ["p1", "p2", "p3", "p4", "p5"] and report.rows_read == 5
    # The database changed: the next read sees it (no stale cache).
    (tmp_path / "prefs.db").unlink()
    _sqlite(tmp_path / "prefs.db", [{"prompt": "new", "chosen": "a", "rejected": "b"}])
    ds, _ = run(tmp_path, {"kind": "sql", "sqlite": "prefs.db", "query": "select prompt, chosen, rejected from prefs"})
    assert "new" in ids(ds)


def test_sql_errors(tmp_path):
    _sqlite(tmp_path / "prefs.db", ROWS)
    with pytest.raises(DataError) as err:
        run(tmp_path, {"kind": "sql", "sqlite": "prefs.db", "query": "select nope from missing_table"})
    assert "data.source.query" in err.value.message and "missing_table" in err.value.message
    with pytest.raises(DataError, match="no SQLite file"):
        run(tmp_path, {"kind": "sql", "sqlite": "absent.db", "query": "select 1"})


def test_sql_password_comes_from_the_environment(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from rmspec.data.sources import sql_url

    src = SimpleNamespace(sqlite=None, url="postgresql://reader@db.example:5432/prefs", password_env="RMSPEC_TEST_PW")
    monkeypatch.delenv("RMSPEC_TEST_PW", raising=False)
    with pytest.raises(DataError, match="RMSPEC_TEST_PW"):
        sql_url(src, tmp_path, "data.source")
    monkeypatch.setenv("RMSPEC_TEST_PW", "s3cr:et")
    from sqlalchemy.engine import make_url

    url = make_url(sql_url(src, tmp_path, "data.source"))
    assert (url.username, url.password, url.host, url.database) == ("reader", "s3cr:et", "db.example", "prefs")


def test_custom_source_through_a_real_entry_point(tmp_path, monkeypatch):
    """A package registers `rmspec.sources = tiny = tinysrc:make`; the spec names kind: tiny."""
    site = tmp_path / "site"
    (site / "tinysrc_pkg-0.1.dist-info").mkdir(parents=True)
    (site / "tinysrc_pkg-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tinysrc-pkg\nVersion: 0.1\n"
    )
    (site / "tinysrc_pkg-0.1.dist-info" / "entry_points.txt").write_text("[rmspec.sources]\ntiny = tinysrc:make\n")
    (site / "tinysrc.py").write_text(
        "import datasets\n"
        "def make(options, base_dir):\n"
        "    n = options['n']\n"
        "    return datasets.Dataset.from_list([{'prompt': f'c{i}', 'chosen': 'y', 'rejected': 'n'} for i in range(n)])\n"
    )
    monkeypatch.syspath_prepend(str(site))
    ds, _ = run(tmp_path, {"kind": "tiny", "options": {"n": 3}})
    assert ids(ds) == ["c0", "c1", "c2"]
    sys.modules.pop("tinysrc", None)
