"""Read a run back from each tracker's own local files, as {(metric, step): value}."""

from __future__ import annotations

import json
import struct
from pathlib import Path


def last_values(pairs) -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    for key, step, value in pairs:
        out[(key, int(step))] = float(value)
    return out


def tensorboard(run: Path) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return last_values((tag, e.step, e.value) for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag))


def mlflow(run: Path) -> dict:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{run / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rmspec")
    (found,) = client.search_runs([experiment.experiment_id])
    keys = found.data.metrics
    return last_values((k, m.step, m.value) for k in keys for m in client.get_metric_history(found.info.run_id, k))


def swanlab(run: Path) -> dict:
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    (path,) = (run / "swanlog").glob("run-*/*.swanlab")
    reader = DataStoreReader()
    reader.open(str(path))
    pairs = []
    for raw in reader:
        record = Record()
        record.ParseFromString(raw)
        if record.HasField("scalar"):
            pairs.append((record.scalar.key, record.scalar.step, record.scalar.value.number))
    return last_values(pairs)


def wandb_records(path: Path):
    """The records of a `.wandb` file: wandb's LevelDB-style log (7-byte file header, 32 KiB blocks,
    chunks with a crc32/length/type header); wandb 0.31 ships no Python reader of it any more."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a wandb datastore"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record
            pending = b""


def wandb(run: Path) -> dict:
    (path,) = (run / "wandb").glob("offline-run-*/run-*.wandb")
    pairs = []
    for record in wandb_records(path):
        if record.WhichOneof("record_type") != "history":
            continue
        items = {(item.key or "/".join(item.nested_key)): json.loads(item.value_json) for item in record.history.item}
        step = items.get("_step", record.history.step.num)
        pairs += [(k, step, v) for k, v in items.items() if not k.startswith("_") and isinstance(v, (int, float))]
    return last_values(pairs)


def trackio(run: Path) -> dict:
    """Trackio's own reader (SQLiteStorage.get_logs) on the run's store, RUN/trackio."""
    import trackio.sqlite_storage as storage

    saved = storage.TRACKIO_DIR  # read once at import; point it at this run's store for the read
    storage.TRACKIO_DIR = run / "trackio"
    try:
        logs = storage.SQLiteStorage.get_logs("rmspec", run.name)
    finally:
        storage.TRACKIO_DIR = saved
    skip = {"step", "timestamp"}
    return last_values(
        (k, row["step"], v) for row in logs for k, v in row.items() if k not in skip and isinstance(v, (int, float))
    )
