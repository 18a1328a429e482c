"""`kind: sql` sources: the rows of a query, over SQLAlchemy (any database with a driver) or an
SQLite file. Streamed into an Arrow dataset by `datasets`, 10,000 rows at a time."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from rmspec.data.files import short as _short
from rmspec.errors import DataError


def sql_url(source: Any, base_dir: Path, where: str) -> str:
    """The SQLAlchemy URL, with the password taken from the environment variable the spec names."""
    from sqlalchemy.engine import make_url

    if source.sqlite is not None:
        path = Path(source.sqlite)
        path = path if path.is_absolute() else base_dir / path
        if not path.is_file():
            raise DataError(f"{where}.sqlite: no SQLite file {path}", "the path is relative to the spec file's folder")
        return f"sqlite:///{path}"
    try:
        url = make_url(source.url)
    except Exception as exc:
        raise DataError(
            f"{where}.url: not an SQLAlchemy URL: {_short(exc)}", "write it as dialect+driver://user@host:port/database"
        ) from None
    if source.password_env:
        password = os.environ.get(source.password_env)
        if password is None:
            raise DataError(
                f"{where}.password_env: the environment variable {source.password_env} is not set",
                f"export {source.password_env}=<the database password>",
            )
        url = url.set(password=password)
    return url.render_as_string(hide_password=False)


def sql_source(source: Any, base_dir: Path, where: str):
    import datasets
    import sqlalchemy

    url = sql_url(source, base_dir, where)
    try:
        engine = sqlalchemy.create_engine(url)
    except Exception as exc:  # e.g. a driver that is not installed
        raise DataError(
            f"{where}: cannot connect with {source.url or source.sqlite!r}: {_short(exc)}",
            "install the database driver (e.g. psycopg for postgresql) and check the URL",
        ) from None
    # Probe the query first so that a typo is a located error, not a failure inside a generator.
    try:
        with engine.connect() as conn:
            columns = list(conn.execute(sqlalchemy.text(source.query)).keys())
    except Exception as exc:
        engine.dispose()
        raise DataError(
            f"{where}.query: the query failed: {_short(exc)}",
            "run it in your SQL client first; it must be a SELECT returning the mapped columns",
        ) from None
    # A live database has no version to cache by; an SQLite file has its size and mtime.
    if source.sqlite is not None:
        stat = Path(url.removeprefix("sqlite:///")).stat()
        stamp = f"{stat.st_size}-{stat.st_mtime_ns}"
    else:
        stamp = os.urandom(8).hex()
    fingerprint = hashlib.sha256(f"{url}\n{source.query}\n{stamp}".encode()).hexdigest()[:32]
    try:
        gen_kwargs = {"url": url, "query": source.query, "columns": tuple(columns)}
        return datasets.Dataset.from_generator(_sql_rows, gen_kwargs=gen_kwargs, fingerprint=fingerprint)
    finally:
        engine.dispose()


def _sql_rows(url: str, query: str, columns: tuple[str, ...]):
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True).execute(sqlalchemy.text(query))
            for chunk in result.partitions(10_000):
                for row in chunk:
                    yield dict(zip(columns, row))
    finally:
        engine.dispose()
