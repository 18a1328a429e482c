"""`data.source`: where the rows come from (huggingface, disk, files, sql, or a registered custom kind)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, PositiveInt, Tag, field_validator, model_validator

from rmspec.spec.base import Section
from rmspec.spec.choices import unknown_choice


class _SourceCommon(Section):
    limit: PositiveInt | None = Field(None, description="Read at most this many rows (quick runs).")


class HuggingFaceSource(_SourceCommon):
    kind: Literal["huggingface"]
    path: str = Field(description="Dataset id on the hub (org/name), or a local dataset script/folder.")
    name: str | None = Field(None, description="Dataset configuration name.")
    data_dir: str | None = Field(None, description="Sub-directory of the dataset repository (e.g. helpful-base).")
    split: str = Field("train", description="Split to read.")
    revision: str | None = Field(None, description="Dataset revision to pin.")
    streaming: bool = Field(False, description="Stream rows instead of downloading the whole dataset.")
    token_env: str | None = Field(None, description="Environment variable holding a hub token for gated datasets.")


class DiskSource(_SourceCommon):
    kind: Literal["disk"]
    path: str = Field(description="Directory written by datasets' save_to_disk.")
    split: str | None = Field(None, description="Split to read when the directory holds a DatasetDict.")


class FilesSource(_SourceCommon):
    kind: Literal["files"]
    paths: list[str] = Field(min_length=1, description="Files or glob patterns, relative to the spec file.")
    format: Literal["auto", "json", "jsonl", "parquet", "csv"] = Field(
        "auto", description="File format; auto goes by the extension."
    )
    encoding: str = Field(
        "utf-8",
        description="Text encoding of JSON, JSON Lines and CSV files (e.g. latin-1 for a legacy export); "
        "a JSON Lines row that does not decode is rejected with reason encoding.",
    )

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, encoding: str) -> str:
        import codecs

        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ValueError(f"unknown encoding {encoding!r} (e.g. utf-8, latin-1, cp1252, utf-16)") from None
        return encoding


class SqlSource(_SourceCommon):
    kind: Literal["sql"]
    url: str | None = Field(None, description="SQLAlchemy URL without a password, e.g. postgresql://user@host/db.")
    sqlite: str | None = Field(None, description="Path to an SQLite file (relative to the spec file).")
    query: str = Field(description="SELECT statement whose columns feed the mapping.")
    password_env: str | None = Field(
        None, description="Environment variable that holds the database password (never the password itself)."
    )

    @model_validator(mode="after")
    def _one_target(self) -> SqlSource:
        if (self.url is None) == (self.sqlite is None):
            raise ValueError("give exactly one of url or sqlite")
        if self.sqlite is not None and self.password_env is not None:  # it would be read nowhere
            raise ValueError(
                "password_env is for url: (a database server); an SQLite file has no password: remove password_env"
            )
        return self

    @field_validator("url")
    @classmethod
    def _no_password(cls, url: str | None) -> str | None:
        if url and "://" in url:
            netloc = url.split("://", 1)[1].split("/", 1)[0]
            if "@" in netloc and ":" in netloc.split("@", 1)[0]:
                raise ValueError(
                    "the URL holds a password; secrets never sit in a spec: remove it and name the "
                    "environment variable that holds it in password_env"
                )
        return url


BUILTIN_SOURCES = ("huggingface", "disk", "files", "sql")


def registered_sources() -> dict[str, str]:
    """Custom sources from the `rmspec.sources` entry-point group (name -> object path)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="rmspec.sources")}


class CustomSource(_SourceCommon):
    """A source registered by a package through the `rmspec.sources` entry point."""

    kind: str = Field(description="Name of a source registered under the rmspec.sources entry point.")
    options: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the source.")

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        custom = registered_sources()
        if kind not in custom:
            raise ValueError(unknown_choice("source kind", kind, [*BUILTIN_SOURCES, *custom]))
        return kind


def _source_tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in BUILTIN_SOURCES else "custom"


Source = Annotated[
    Annotated[HuggingFaceSource, Tag("huggingface")]
    | Annotated[DiskSource, Tag("disk")]
    | Annotated[FilesSource, Tag("files")]
    | Annotated[SqlSource, Tag("sql")]
    | Annotated[CustomSource, Tag("custom")],
    Discriminator(_source_tag),
]
