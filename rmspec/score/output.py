"""The scored file, the rejects file, and the progress record behind `--resume`.

After every chunk both files are flushed and `OUT.progress.json` records how many input rows are
finished and how long each file was at that point (written atomically). A resumed run cuts both
files back to those lengths (dropping a chunk that was half written when the run stopped) and
skips the finished rows, so no row is scored twice or lost. The rejects file is made by the first
rejected row (none rejected: no file), and a finished run removes its progress record: what stays
beside a finished output is the output and, where rows were rejected, their rejects.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from rmspec.errors import DataError

OUT_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


def progress_path(out: Path) -> Path:
    return out.with_name(out.name + ".progress.json")


def rejects_path(out: Path) -> Path:
    return out.with_name(out.stem + ".rejects.jsonl")


def out_format(out: Path) -> str:
    fmt = OUT_FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise DataError(f"--out {out}: write .jsonl or .csv", "e.g. --out scored.jsonl")
    return fmt


class Writer:
    def __init__(self, out: Path, *, resume_state: dict[str, Any] | None, identity: dict[str, Any]):
        self.out, self.rejects = out, rejects_path(out)
        self.format = out_format(out)
        self.identity = identity
        self.state = resume_state or {
            "rows_done": 0,
            "scored": 0,
            "rejected": 0,
            "reasons": {},
            "out_bytes": 0,
            "rejects_bytes": 0,
            "csv_header": None,
            "done": False,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        for path, size in ((out, self.state["out_bytes"]), (self.rejects, self.state["rejects_bytes"])):
            if path == out or path.exists():
                with path.open("ab") as f:
                    f.truncate(size)
        self._out = out.open("a", encoding="utf-8", newline="")
        self._rej: Any = None  # opened by the first rejected row
        self._csv: csv.DictWriter | None = None

    def write(self, rows: list[dict[str, Any]], rejects: list[dict[str, Any]], input_rows: int) -> None:
        if self.format == "jsonl":
            for row in rows:
                self._out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        else:
            self._write_csv(rows)
        if rejects and self._rej is None:
            self._rej = self.rejects.open("a", encoding="utf-8")
        for rej in rejects:
            self._rej.write(json.dumps(rej, ensure_ascii=False, default=str) + "\n")
            self.state["reasons"][rej["reason_kind"]] = self.state["reasons"].get(rej["reason_kind"], 0) + 1
        for f in (self._out, self._rej):
            if f is not None:
                f.flush()
                os.fsync(f.fileno())
        s = self.state
        s["rows_done"] += input_rows
        s["scored"] += len(rows)
        s["rejected"] += len(rejects)
        s["out_bytes"] = self.out.stat().st_size
        s["rejects_bytes"] = self.rejects.stat().st_size if self.rejects.exists() else 0
        self._save()

    def _write_csv(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if self.state["csv_header"] is None:
            self.state["csv_header"] = list(rows[0])
        if self._csv is None:
            self._csv = csv.DictWriter(self._out, fieldnames=self.state["csv_header"], extrasaction="ignore")
            if self.state["out_bytes"] == 0:
                self._csv.writeheader()
        self._csv.writerows(
            {k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v for k, v in r.items()}
            for r in rows
        )

    def finish(self) -> None:
        """Close the files and remove the progress record: the output is complete."""
        self.state["done"] = True
        self._out.close()
        if self._rej is not None:
            self._rej.close()
        progress_path(self.out).unlink(missing_ok=True)

    def _save(self) -> None:
        path = progress_path(self.out)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({**self.identity, **self.state}, indent=1))
        os.replace(tmp, path)


def finished_state(out: Path) -> dict[str, Any]:
    """The counts of a finished output (its progress record is gone): its rows, and its rejects by reason."""
    with out.open(encoding="utf-8", newline="") as handle:
        scored = (
            sum(1 for _ in csv.DictReader(handle)) if out_format(out) == "csv" else sum(1 for x in handle if x.strip())
        )
    reasons: dict[str, int] = {}
    rejects = rejects_path(out)
    if rejects.exists():
        for line in rejects.read_text(encoding="utf-8").splitlines():
            if line.strip():
                kind = json.loads(line).get("reason_kind", "unknown")
                reasons[kind] = reasons.get(kind, 0) + 1
    rejected = sum(reasons.values())
    return {"rows_done": scored + rejected, "scored": scored, "rejected": rejected, "reasons": reasons, "done": True}


def load_resume(out: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
    """The saved state of an interrupted run on the same input and model, or None to start afresh."""
    path = progress_path(out)
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    for key, value in identity.items():
        if saved.get(key) != value:
            raise DataError(
                f"--resume: {out} was written with a different {key} ({saved.get(key)!r}, now {value!r})",
                "resume with the same model, input and --columns, or start afresh with --overwrite",
            )
    return {k: v for k, v in saved.items() if k not in identity}
