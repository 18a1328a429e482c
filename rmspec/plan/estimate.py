"""Data size (counted cheaply where the source is local) and the time a step and an epoch take.

Time comes from FLOPs and an assumed model FLOPs utilisation (MFU) that the plan states:
6 x (non-embedding parameters) per token for full fine-tuning (forward 2, backward 4),
4 x for LoRA (no weight gradients for the frozen base), 2 x more with activation
checkpointing (the forward runs twice), plus attention's 12 x layers x q_dim x seq per
token.

Tokens per sequence: where the source is local files or SQLite and the mapping is plain text
columns (preset pairs, or explicit columns), the first SAMPLE_ROWS rows give the mean
characters of prompt + response; divided by CHARS_PER_TOKEN (each sequence clipped at
max_length) and raised by PADDING_ALLOWANCE (length-grouped batches pad to their longest row),
that is the tokens per sequence the time estimate uses, capped at max_length. Elsewhere (hub
sources, chat/transcript presets, no readable sample) every sequence is counted at max_length,
an upper bound. The memory model always uses max_length (rmspec/plan/memory.py): it must bound
the worst batch, not the mean one.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

from rmspec import rows as row_reader
from rmspec.plan.model_shape import ModelShape
from rmspec.spec import presets
from rmspec.spec.row_kinds import PAIRS, SCORED

MFU_GPU = 0.40
MFU_GPU_OFFLOAD = 0.20
# CPU: peak x MFU is calibrated on one measured run, not a vendor figure; see
# rmspec/spec/hardware.py DEVICE_CATALOG["cpu"] (per CPU_CATALOG_CORES cores, scaled by the core count).
MFU_CPU = 0.50
CPU_CATALOG_CORES = 2

# Length guess. CHARS_PER_TOKEN is a conservative single constant for English text: measured
# 4.24 characters per token (special tokens included) for the all-MiniLM-L6-v2 tokenizer on
# rmspec/data/demo/preferences.jsonl (bench/plan_estimate_chars_per_token.py,
# bench/results/plan_estimate_chars_per_token.md); 4 slightly overcounts tokens there, and
# BPE tokenizers of decoder models are usually at 3.5 to 4.5 on English. Code, maths and other
# languages tokenize denser, so the guess is an estimate, never a bound.
CHARS_PER_TOKEN = 4.0
PADDING_ALLOWANCE = 0.10  # share of padding measured with length-grouped batches (bench/results/train_quickstart.md)
SAMPLE_ROWS = 500


def _local_files(source, base_dir: Path) -> list[str]:
    """The files of a `files` source, by the data stage's rule (rmspec.rows.resolve_paths: `**`
    recurses, regular files only); a pattern that matches nothing is left out here (the data
    stage reports it)."""
    found: list[str] = []
    for pattern in source.paths:
        try:
            found.extend(row_reader.resolve_paths([pattern], base_dir))
        except row_reader.RowError:
            continue
    return found


def _count_file(path: Path, fmt: str) -> int | None:
    """Rows of one file (None: a format no reader knows); raises RowError for a file the data
    stage would refuse (another format's magic bytes, bytes that do not decode in a document)."""
    if row_reader.format_of(path, fmt) not in row_reader.FORMATS:
        return None
    opened = row_reader.open_rows(path, fmt)
    if opened.format == "jsonl":  # count lines, not parse them: the plan stays fast on large files
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    if opened.total is not None:
        return opened.total
    return sum(1 for _ in opened.rows)


def _count_saved_dataset(folder: Path, split: str | None) -> tuple[int | None, str]:
    """Rows of a `save_to_disk` folder, from its Arrow files' record batches (memory-mapped, no datasets import)."""
    if (folder / "dataset_dict.json").exists():
        splits = json.loads((folder / "dataset_dict.json").read_text()).get("splits", [])
        chosen = split or ("train" if "train" in splits else (splits[0] if splits else None))
        if chosen is None:
            return None, f"no splits in {folder}"
        folder = folder / chosen
    state = folder / "state.json"
    if not state.exists():
        return None, f"{folder} is not a save_to_disk folder (no state.json)"
    try:
        import pyarrow as pa
    except ImportError:
        return None, "pyarrow is not installed"
    files = [folder / f["filename"] for f in json.loads(state.read_text()).get("_data_files", [])]
    total = 0
    for path in files:
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_stream(source)
            total += sum(batch.num_rows for batch in reader)
    return total, f"counted in {len(files)} Arrow file(s)"


def count_rows(source, base_dir: Path) -> tuple[int | None, str]:
    """Rows the source holds (before filters), and how that was found."""
    rows: int | None = None
    how = f"unknown for a {source.kind} source"
    try:
        if source.kind == "files":
            total, files = 0, 0
            for name in _local_files(source, base_dir):
                count = _count_file(Path(name), source.format)
                if count is None:
                    return (source.limit, f"limit {source.limit}") if source.limit else (None, f"cannot count {name}")
                total += count
                files += 1
            if files:
                rows, how = total, f"counted in {files} file(s)"
            else:
                how = "no file matches data.source.paths"
        elif source.kind == "disk":
            rows, how = _count_saved_dataset(base_dir / source.path, source.split)
        elif source.kind == "sql" and source.sqlite:
            db = base_dir / source.sqlite
            if db.exists():
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                    rows = conn.execute(f"SELECT COUNT(*) FROM ({source.query.rstrip().rstrip(';')})").fetchone()[0]
                how = "SELECT COUNT(*) on the SQLite query"
            else:
                how = f"SQLite file {db} not found"
    except (OSError, ValueError, sqlite3.Error) as exc:
        return None, f"could not count rows: {exc}"
    if source.limit is not None and (rows is None or source.limit < rows):
        capped = (how + f", capped by limit {source.limit}") if rows is not None else f"limit {source.limit}"
        return source.limit, capped
    return rows, how


def _sample_file(path: Path, fmt: str, limit: int) -> list[dict] | None:
    """The first `limit` rows of one file, or None where a row cannot be read (RowError)."""
    if row_reader.format_of(path, fmt) not in row_reader.FORMATS:
        return None
    out: list[dict] = []
    for row in row_reader.iter_rows(path, fmt):
        if len(out) >= limit:
            break
        if row.error is not None:
            raise row.error
        assert row.value is not None  # a Row holds a value or an error
        out.append(row.value)
    return out


def prompt_once_tokens(prompt: float, answers: list[float], max_length: int) -> tuple[float, float]:
    """(the prompt-once row, one sequence per answer), in tokens, of a prompt and its answers of ``prompt`` and
    ``answers`` tokens: each answer cut to max_length, and the prompt cut once, as the data stage cuts it, so that
    the longest answer fits after it."""
    answers = [min(a, max_length) for a in answers]
    p = max(0.0, min(prompt, max_length - max(answers)))
    row, unpacked = p, len(answers) * p
    for a in answers:
        row, unpacked = row + a, unpacked + a
    return row, unpacked


def padded_mean(values: list[float], bound: int) -> int:
    """Sampled tokens' mean with PADDING_ALLOWANCE, rounded up, at most ``bound``."""
    return min(math.ceil(sum(values) / len(values) * (1 + PADDING_ALLOWANCE)), bound)


def sample_rows(source, base_dir: Path, limit: int = SAMPLE_ROWS) -> list[dict] | None:
    """The first `limit` rows of a local files or SQLite source (no filters), or None where not cheap to read."""
    try:
        if source.kind == "files":
            sampled: list[dict] = []
            for name in _local_files(source, base_dir):
                got = _sample_file(Path(name), source.format, limit - len(sampled))
                if got is None:
                    return None
                sampled.extend(got)
                if len(sampled) >= limit:
                    return sampled[:limit]
            return sampled
        if source.kind == "sql" and source.sqlite:
            db = base_dir / source.sqlite
            if not db.exists():
                return None
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                conn.row_factory = sqlite3.Row
                query = f"SELECT * FROM ({source.query.rstrip().rstrip(';')}) LIMIT {int(limit)}"
                return [dict(row) for row in conn.execute(query)]
    except (OSError, ValueError, sqlite3.Error):
        return None
    return None


def text_columns(mapping, approach: str) -> tuple[str | None, list[str]] | None:
    """(prompt column, response columns) where the mapping is plain text columns; None for other layouts.
    `approach`: the rows the approach trains on (rmspec.spec.approach: PAIRS, SCORED, ...)."""
    layout = presets.get(mapping.preset)  # None: explicit columns
    if mapping.preset is not None and not (layout and layout.plain_text):
        return None
    defaults = dict(layout.columns) if layout else {}
    cols = {**defaults, **{k: v for k, v in mapping.columns.model_dump().items() if isinstance(v, str)}}
    if approach == PAIRS and cols.get("chosen") and cols.get("rejected"):
        return cols.get("prompt"), [cols["chosen"], cols["rejected"]]
    if approach == SCORED and cols.get("response"):
        return cols.get("prompt"), [cols["response"]]
    return None


def sequence_length(source, mapping, approach: str, base_dir: Path, max_length: int) -> tuple[int, str]:
    """Tokens per sequence for the time estimate, and how it was found (max_length where no guess is sound)."""
    columns = text_columns(mapping, approach)
    if columns is None:
        preset = f"preset {mapping.preset}" if mapping.preset else "this mapping"
        return max_length, f"max_length {max_length} (no length guess for {preset} with approach {approach})"
    if source.kind not in ("files", "sql") or (source.kind == "sql" and not source.sqlite):
        return max_length, f"max_length {max_length} (no length guess for a {source.kind} source)"
    rows = sample_rows(source, base_dir)
    if not rows:
        return max_length, f"max_length {max_length} (no rows could be sampled)"
    prompt_col, response_cols = columns
    tokens = []
    for row in rows:
        if not isinstance(row, dict):
            return max_length, f"max_length {max_length} (sampled rows are not records)"
        prompt = row.get(prompt_col, "") if prompt_col else ""
        prompt = "" if prompt is None else prompt
        for col in response_cols:
            response = row.get(col)
            if response is None:
                continue
            for item in response if isinstance(response, list) else [response]:  # a rejected list: each answer
                if not isinstance(prompt, str) or not isinstance(item, str):
                    return max_length, f"max_length {max_length} (column {col!r} or the prompt is not plain text)"
                tokens.append(min((len(prompt) + len(item)) / CHARS_PER_TOKEN, max_length))
    if not tokens:
        return max_length, f"max_length {max_length} (sampled rows lack the mapped columns)"
    mean = sum(tokens) / len(tokens)
    per_sequence = min(math.ceil(mean * (1 + PADDING_ALLOWANCE)), max_length)
    return per_sequence, (
        f"mean {mean:.0f} tokens from {len(rows)} sampled rows at {CHARS_PER_TOKEN:g} chars/token, "
        f"+{PADDING_ALLOWANCE:.0%} padding: {per_sequence} of max_length {max_length}"
    )


def flops_per_token(shape: ModelShape, *, seq_len: int, lora: bool, checkpointing: bool, lm_head: bool) -> float:
    n = shape.non_embedding_parameters()
    dense = (4 if lora else 6) * n + (2 * n if checkpointing else 0)
    attention = 12 * shape.num_layers * shape.q_dim * seq_len * (4 / 3 if checkpointing else 1)
    head = (6 * shape.vocab_size * shape.hidden_size) if lm_head else 0
    return dense + attention + head


def time_estimate(
    *,
    shape: ModelShape,
    rows: int | None,
    rows_how: str,
    validation_fraction: float | None,
    global_batch: int,
    sequences_per_example: int,
    seq_len: int,
    seq_len_how: str,
    max_length: int,
    lora: bool,
    checkpointing: bool,
    lm_head: bool,
    num_processes: int,
    nodes: int,
    peak_tflops: float,
    is_gpu: bool,
    offload: bool,
    cpu_cores: int | None,
    epochs: float | None,
    max_steps: int | None,
) -> dict:
    """`seq_len`: tokens per sequence for time (from sequence_length); `peak_tflops`: per GPU, or for
    CPU per CPU_CATALOG_CORES cores, scaled by `cpu_cores` per node (processes on a node share its cores)."""
    mfu = (MFU_GPU_OFFLOAD if offload else MFU_GPU) if is_gpu else MFU_CPU
    tokens_per_step = global_batch * sequences_per_example * seq_len
    flops_step = (
        flops_per_token(shape, seq_len=seq_len, lora=lora, checkpointing=checkpointing, lm_head=lm_head)
        * tokens_per_step
    )
    if is_gpu:
        peak_total = num_processes * peak_tflops
        compute = f"{num_processes} device(s)"
    else:
        cores = cpu_cores or CPU_CATALOG_CORES
        peak_total = nodes * peak_tflops * cores / CPU_CATALOG_CORES
        compute = f"{nodes} node(s) x {cores} cores{'' if cpu_cores else ' (core count unknown, assumed)'}"
    seconds_per_step = flops_step / (peak_total * 1e12 * mfu)
    length_note = (
        f"every sequence counted at {seq_len_how}"
        if seq_len_how.startswith("max_length")
        else f"tokens per sequence guessed: {seq_len_how}"
    )
    out = {
        "flops_per_step": flops_step,
        "assumed_mfu": mfu,
        "peak_tflops_per_device": peak_tflops,
        "peak_tflops_total": round(peak_total, 4),
        "compute": compute,
        "cpu_cores": None if is_gpu else (cpu_cores or None),
        "tokens_per_sequence": seq_len,
        "tokens_per_sequence_source": seq_len_how,
        "tokens_per_step": tokens_per_step,
        "seconds_per_step": round(seconds_per_step, 4),
        "rows": rows,
        "rows_source": rows_how,
        "train_rows": None,
        "steps_per_epoch": None,
        "seconds_per_epoch": None,
        "total_steps": max_steps,
        "note": f"compute only (communication not modelled); {length_note}; rows before filters and augmentation",
    }
    if rows is not None:
        train = int(rows * (1 - validation_fraction)) if validation_fraction else rows
        steps = max(math.ceil(train / global_batch), 1)
        out.update(train_rows=train, steps_per_epoch=steps, seconds_per_epoch=round(steps * seconds_per_step, 1))
        if max_steps is None and epochs is not None:
            out["total_steps"] = math.ceil(steps * epochs)
    return out


# ---------------------------------------------------------------- mixtures (data.sources)


def data_rows(data, base_dir: Path) -> tuple[int | None, str]:
    """Rows the data section gives before the split: one source's count, or a mixture's mixed size.

    A mixture's weights size it as the data stage does (rmspec.data.mixture): first_exhausted takes
    min(n_i / w_i) rows, all_exhausted max(n_i / w_i); `rows: N` entries give N training rows each
    (counted here before the split, N / (1 - validation_fraction)), `rows: all` their count."""
    if not data.is_mixture:
        return count_rows(data.source, base_dir)
    counted: dict[str, int] = {}
    for entry in data.mixture():
        rows, how = count_rows(entry.source, base_dir)
        if rows is None:
            return None, f"{entry.name}: {how}"
        counted[entry.name] = rows
    shown = ", ".join(f"{k} {v}" for k, v in counted.items())
    if data.weighted:
        ratios = [counted[e.name] / e.weight for e in data.mixture() if e.weight]
        total = min(ratios) if data.stopping_strategy == "first_exhausted" else max(ratios)
        mixed = sum(round(e.weight * total) for e in data.mixture())
        return mixed, f"mixture of {shown} by weight ({data.stopping_strategy})"
    keep = 1 - (data.split.validation_fraction or 0) if data.split.validation_source is None else 1
    mixed = sum(counted[e.name] if e.rows == "all" else math.ceil(int(e.rows) / keep) for e in data.mixture())
    return mixed, f"mixture of {shown} by rows"


def pairs_per_row(data, approach: str, base_dir: Path, rows: int | None, how: str) -> tuple[int | None, str]:
    """``rows`` (source rows) as the pairs binarize: all_pairs makes of them: x the mean list size of the sampled
    rows where the rejected column holds lists of answers (rmspec.data.rejected_list); elsewhere (UltraFeedback's
    completions, a mixture) the source rows, with a note that the data stage counts the pairs."""
    mappings = [e.mapping for e in data.mixture()] if data.is_mixture else [data.mapping]
    if approach != PAIRS or not any(m.binarize == "all_pairs" for m in mappings):
        return rows, how
    mapping, column = data.mapping, data.mapping.columns.rejected
    sampled = None if data.is_mixture or mapping.preset or not column else sample_rows(data.source, base_dir)
    sizes = [
        len(v) if mapping.holds_answers(v) else 1 for r in sampled or [] if isinstance(r, dict) and (v := r.get(column))
    ]
    note = "; source rows, before binarize: all_pairs makes several pairs of one (`rmspec data report` counts them)"
    if rows is None or not sizes:
        return rows, how + note
    factor = sum(sizes) / len(sizes)
    counted = f"{how}, x {factor:.2f} pairs a row (binarize: all_pairs, {len(sizes)} sampled rows' {column!r})"
    return round(rows * factor), counted


def data_sequence_length(data, approach: str, base_dir: Path, max_length: int) -> tuple[int, str]:
    """Tokens per sequence for time: one source's guess, or the weighted mean of a mixture's."""
    if not data.is_mixture:
        return sequence_length(data.source, data.mapping, approach, base_dir, max_length)
    entries = data.mixture()
    weights = [e.weight if e.weight is not None else 1 / len(entries) for e in entries]
    guesses = [sequence_length(e.source, e.mapping, approach, base_dir, max_length)[0] for e in entries]
    mean = round(sum(w * g for w, g in zip(weights, guesses)) / sum(weights))
    return min(mean, max_length), "mixture: " + ", ".join(
        f"{e.name} {g}" for e, g in zip(entries, guesses)
    ) + " tokens per sequence, weighted"
