"""data.num_proc: the preprocessing stages run in that many processes, and the prepared rows are the
same as in one process (same ids, tokens and rejects, in the same order)."""

from __future__ import annotations

import datasets

from helpers.data import bert_tokenizer, make_spec, read_jsonl, write_jsonl
from rmspec.data import prepare


def test_two_processes_prepare_the_same_rows_as_one(tmp_path, monkeypatch):
    rows = [
        {
            "id": f"r{i}",
            "prompt": f"question {i} " + "word " * (i % 40),
            "chosen": f"good {i}",
            "rejected": f"bad {i}" if i % 17 else f"good {i}",
        }
        for i in range(300)
    ]
    write_jsonl(tmp_path / "d.jsonl", rows)
    used = []
    original = datasets.Dataset.map

    def recording_map(self, *args, **kwargs):
        used.append(kwargs.get("num_proc"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(datasets.Dataset, "map", recording_map)
    out = {}
    for n in (1, 2):
        used.clear()
        folder = tmp_path / f"p{n}"
        folder.mkdir()
        loaded = make_spec(
            folder,
            {
                "source": {"kind": "files", "paths": [str(tmp_path / "d.jsonl")]},
                "mapping": {"preset": "pairs"},
                "num_proc": n,
                "split": {"validation_fraction": 0.2, "seed": 0},
                "filters": [{"kind": "max_length", "max_tokens": 40}],
            },
            max_length=40,
        )
        prepared = prepare(loaded, bert_tokenizer(), cache_dir=folder / "cache", rejects_path=folder / "rejects.jsonl")
        assert (2 in used) == (n == 2) and all(p in (None, n) for p in used), used
        out[n] = (prepared.train.to_list(), prepared.validation.to_list(), read_jsonl(folder / "rejects.jsonl"))
    assert out[1][2], "the data has rejects (identical sides, too long) to compare"
    assert out[1] == out[2]
