"""Talk to a running Label Studio through `label-studio-sdk`: push tasks, pull an export.

The token is read from an environment variable named by the user (`--token-env`), never from an
argument or a file. The SDK accepts both a legacy token and a personal access token.
Connection and HTTP errors become `RmspecError`s that say which server, project and fix.
"""

from __future__ import annotations

import json
import os
from typing import Any

from rmspec.errors import RmspecError


def client(url: str, token_env: str):
    token = os.environ.get(token_env)
    if not token:
        raise RmspecError(
            f"environment variable {token_env} is not set (the Label Studio API token)",
            f"export {token_env}=<token from Label Studio: Account & Settings > Access Token>",
        )
    try:
        from label_studio_sdk import LabelStudio
    except ImportError:
        raise RmspecError("label-studio-sdk is not installed", "pip install 'rmspec[annotate]'") from None
    return LabelStudio(base_url=url.rstrip("/"), api_key=token)


def _call(what: str, url: str, fn, *args, **kwargs):
    from label_studio_sdk.core.api_error import ApiError

    try:
        return fn(*args, **kwargs)
    except ApiError as exc:
        body = exc.body if isinstance(exc.body, (str, type(None))) else json.dumps(exc.body)[:300]
        hint = "check the token (--token-env) and that its user belongs to the project's organization"
        if exc.status_code == 404:
            hint = "check the project id and the server URL"
        raise RmspecError(f"Label Studio at {url}: {what} failed with HTTP {exc.status_code}: {body}", hint) from None
    except OSError as exc:
        raise RmspecError(
            f"Label Studio at {url}: {what} failed: {exc}", "is the server running at that URL?"
        ) from None
    except Exception as exc:  # httpx transport errors are not OSErrors
        if type(exc).__module__.startswith("httpx"):
            raise RmspecError(
                f"Label Studio at {url}: {what} failed: {exc}", "is the server running at that URL?"
            ) from None
        raise


def push(url: str, token_env: str, project: str, config: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Create the project titled ``project`` (or update its label config) and import ``tasks``."""
    ls = client(url, token_env)
    existing = [
        p for p in _call("listing projects", url, lambda: list(ls.projects.list(title=project))) if p.title == project
    ]
    if len(existing) > 1:
        raise RmspecError(
            f"Label Studio at {url}: {len(existing)} projects are titled {project!r}",
            "rename one of them, or give a unique --project title",
        )
    if existing:
        pid = existing[0].id
        _call("updating the label config", url, ls.projects.update, pid, label_config=config)
        created = False
    else:
        made = _call("creating the project", url, ls.projects.create, title=project, label_config=config)
        pid, created = made.id, True
    response = _call("importing tasks", url, ls.projects.import_tasks, pid, request=tasks, return_task_ids=True)
    imported = getattr(response, "task_count", None)
    return {
        "project_id": pid,
        "created": created,
        "tasks_sent": len(tasks),
        "tasks_imported": imported,
        "task_ids": list(getattr(response, "task_ids", None) or []),
    }


def pull_export(url: str, token_env: str, project_id: int, export_type: str = "JSON") -> Any:
    """A project's export, as Label Studio writes it, every task included (those without labels too)."""
    ls = client(url, token_env)
    chunks = _call(
        "exporting",
        url,
        lambda: b"".join(
            ls.projects.exports.download_sync(project_id, export_type=export_type, download_all_tasks=True)
        ),
    )
    try:
        return json.loads(chunks)
    except json.JSONDecodeError as exc:
        raise RmspecError(
            f"Label Studio at {url}: the {export_type} export of project {project_id} is not JSON ({exc})",
            "export as JSON or JSON_MIN",
        ) from None
