"""`rmspec init`: a commented spec from a template (an approach) or a shipped example spec.

Every file read here ships inside the package (see shipped.py), so init works from a wheel.
Paths to shipped files (demo data, the JSON Schema) are written absolute: they name the files of
the rmspec that wrote the spec, wherever the spec is written. The user's own files stay relative
to the spec, as a spec's paths are.
"""

from __future__ import annotations

from pathlib import Path

from rmspec import approaches, documents
from rmspec.errors import RmspecError
from rmspec.scaffold.data_choice import data_section
from rmspec.scaffold.data_choice import names as data_names
from rmspec.scaffold.shipped import (
    DEMO_DIR,
    SCHEMA,
    SPECS,
    TEMPLATES,
    absolute_shipped_paths,
    example_names,
)
from rmspec.spec.choices import unknown_choice

# `init --approach` choices: the approaches (the registry's, in its order), then the documents that
# train nothing (rmspec.documents: a composite), each written from its own template.
OWN_DOCUMENTS = {kind.name: kind for kind in documents.own_kinds()}
APPROACHES = approaches.names() + tuple(OWN_DOCUMENTS)

__all__ = [
    "APPROACHES",
    "DEMO_DIR",
    "SCHEMA",
    "SPECS",
    "TEMPLATES",
    "build_document",
    "data_names",
    "example_document",
    "example_names",
    "render_spec",
]


def build_document(
    approach: str,
    data: str | None,
    model: str | None,
    out_dir: Path,
    name: str | None = None,
    preset: str | None = None,
) -> tuple[dict, str | None]:
    """(the spec document for this approach, a note about the data for the user or None)."""
    from rmspec.spec.yaml_io import read_yaml_file

    if approach not in APPROACHES:
        raise RmspecError(unknown_choice("approach", approach, APPROACHES))
    if preset is not None and data is None:
        raise RmspecError("--preset says how the --data file or hub dataset is laid out; give --data too")
    own = OWN_DOCUMENTS.get(approach)
    if data is not None and own is not None:
        raise RmspecError(
            f"--data: approach {approach} names its rows inside its spec (data.train, data.validation), "
            "not through --data",
            hint=f"rmspec init --approach {approach} -o FILE, then edit data: in FILE",
        )
    doc, _ = read_yaml_file(TEMPLATES / (own.template if own is not None else approaches.get(approach).template))
    doc = absolute_shipped_paths(doc, "templates")
    note = None
    if data is not None:
        declared = approaches.get(approach)
        section, note = data_section(data, approach, out_dir, preset)
        doc["data"]["source"] = section["source"]
        doc["data"]["mapping"] = section["mapping"]
        declared.init_document(doc, section["mapping"])
    _apply(doc, model, name)
    return doc, note


def example_document(example: str, model: str | None = None, name: str | None = None) -> dict:
    """A shipped spec (specs/EXAMPLE.yaml) with its demo paths made absolute."""
    from rmspec.spec.yaml_io import read_yaml_file

    if example not in example_names():
        raise RmspecError(unknown_choice("example", example, example_names()))
    doc, _ = read_yaml_file(SPECS / f"{example}.yaml")
    doc = absolute_shipped_paths(doc, "specs")
    _apply(doc, model, name)
    return doc


def _apply(doc: dict, model: str | None, name: str | None) -> None:
    if model is not None and "model" not in doc:  # a spec that trains nothing (a composite) has no model:
        raise RmspecError(
            "--model: this spec trains no model (it has no model: section)",
            hint="name a trained reward model as a component instead: {name: rm, kind: model, path: RUN_OR_MODEL}",
        )
    if model is not None:
        doc["model"]["name_or_path"] = model
    if name is not None:
        doc["name"] = name


def render_spec(doc: dict, model: type) -> str:
    """The YAML text: a header naming the packaged JSON Schema, then each key under the description
    MODEL gives it (its document kind's model: the training spec's, or a composite's)."""
    from rmspec.scaffold.comments import commented_yaml

    header = (
        f"# yaml-language-server: $schema={SCHEMA.resolve()}\n"
        "# Written by `rmspec init`. Check it with `rmspec validate`, size it with `rmspec plan`.\n"
    )
    return commented_yaml(doc, model, header)
