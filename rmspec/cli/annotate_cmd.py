"""`rmspec annotate export|import|agreement`: the Label Studio round trip.

Heavy imports (datasets for a spec source, torch for --model) happen inside the commands only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from rmspec.cli.options import set_option
from rmspec.errors import RmspecError

TOKEN_ENV_DEFAULT = "LABEL_STUDIO_API_KEY"


@click.group()
def annotate() -> None:
    """Label Studio round trip, annotator agreement, and picking the pairs worth labelling."""


@annotate.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder for tasks.json and label_config.xml.",
)
@set_option
@click.option("--seed", default=0, show_default=True, help="Seed of the A/B order (half the pairs are shown swapped).")
@click.option(
    "--select",
    "criterion",
    type=click.Choice(["uncertain", "disagree", "random"]),
    default=None,
    help="Export only N pairs: the model's least sure, the labels it contradicts, or a random sample.",
)
@click.option(
    "--model", "model", default=None, help="Run directory or model folder that scores the pairs for --select."
)
@click.option("--n", "n", type=click.IntRange(min=1), default=None, help="How many pairs --select picks.")
@click.option(
    "--stratify",
    default=None,
    metavar="FIELD",
    help="Split N across the values of FIELD by size: group (the spec's group), or a column of the rows, e.g. subset.",
)
@click.option(
    "--push",
    "push_url",
    default=None,
    metavar="URL",
    help="Also create/update a project on this Label Studio and import the tasks.",
)
@click.option(
    "--token-env",
    default=TOKEN_ENV_DEFAULT,
    show_default=True,
    help="Environment variable holding the Label Studio API token.",
)
@click.option(
    "--project", default=None, help="Project title for --push (created if missing, label config updated if present)."
)
def export(
    source: str,
    out_dir: str,
    sets: tuple[str, ...],
    seed: int,
    criterion: str | None,
    model: str | None,
    n: int | None,
    stratify: str | None,
    push_url: str | None,
    token_env: str,
    project: str | None,
) -> None:
    """Write Label Studio tasks (tasks.json) and the labelling interface (label_config.xml) for SOURCE.

    SOURCE is a spec (its data after mapping and filters) or a JSONL/JSON file of rows with prompt and
    chosen/rejected (labelled) or response_a/response_b (unlabelled).
    """
    from rmspec.annotate import kinds
    from rmspec.annotate.source import load_source
    from rmspec.annotate.tasks import write_export

    if push_url and not project:
        raise RmspecError("--push needs --project NAME", "name the Label Studio project to create or update")
    if criterion and not n:
        raise RmspecError(f"--select {criterion} needs --n", "say how many pairs to pick, e.g. --n 200")
    if criterion in ("uncertain", "disagree") and not model:
        raise RmspecError(
            f"--select {criterion} needs --model RUN_OR_MODEL", "give the run whose uncertainty guides the choice"
        )
    src = load_source(source, sets)
    selection = None
    audit: list[dict] = []
    if criterion:
        if not kinds.of(src.kind).preferences:  # the selection ranks pairs by the model's margin
            raise RmspecError(f"--select works on pairs; this source holds {src.kind} rows", "export without --select")
        from rmspec.annotate.select import load_engine, scored_pairs, select

        if criterion == "random":
            scores, spread = None, None
        else:
            assert model is not None  # uncertain and disagree without --model are refused above
            scores, spread = scored_pairs(load_engine(model), src.items)
        assert n is not None  # --select without --n is refused above
        audit = select(src.items, criterion, n, scores=scores, stratify=stratify, seed=seed, uncertainty=spread)
        total = len(src.items)
        keep = [r["index"] for r in audit]
        src.items = [src.items[i] for i in keep]
        selection = {r["id"]: {k: v for k, v in r.items() if k != "index"} for r in audit}
    tasks_path, config_path, tasks = write_export(src, out_dir, seed, selection)
    lines = [f"{len(tasks)} {src.kind} task(s) -> {tasks_path}", f"label config -> {config_path}"]
    if criterion:
        from rmspec.rundir import atomic_write_text

        sel_path = Path(out_dir) / "selection.jsonl"
        atomic_write_text(
            sel_path, "".join(json.dumps({k: v for k, v in r.items() if k != "index"}) + "\n" for r in audit)
        )
        lines.append(f"selection ({criterion}: {len(audit)} of {total} pairs) with scores -> {sel_path}")
    if push_url:
        from rmspec.annotate.push import push
        from rmspec.annotate.tasks import label_config

        assert project is not None  # --push without --project is refused above
        result = push(push_url, token_env, project, label_config(src), tasks)
        verb = "created" if result["created"] else "updated"
        lines.append(
            f"project {project!r} (id {result['project_id']}) {verb} on {push_url}: "
            f"{result['tasks_imported']} of {result['tasks_sent']} task(s) imported"
        )
    click.echo("\n".join(lines))


def _load_tasks(
    export_file: str | None, from_url: str | None, project_id: int | None, token_env: str, export_type: str
):
    from rmspec.annotate.exports import load_export, parse_export

    if bool(export_file) == bool(from_url):
        raise RmspecError(
            "give an EXPORT file or --from URL --project ID (one of them)",
            "e.g. rmspec annotate import export.json --out pairs.jsonl",
        )
    if from_url:
        if project_id is None:
            raise RmspecError(
                "--from needs --project ID (the numeric project id)", "it is in the project's URL: /projects/ID"
            )
        from rmspec.annotate.push import pull_export

        return parse_export(
            pull_export(from_url, token_env, project_id, export_type), f"{from_url} project {project_id}"
        )
    assert export_file is not None  # one of the two is given (checked above)
    return load_export(export_file)


def _source_options(f):
    f = click.option(
        "--format",
        "export_type",
        type=click.Choice(["JSON", "JSON_MIN"]),
        default="JSON",
        show_default=True,
        help="Export format to pull with --from.",
    )(f)
    f = click.option(
        "--token-env", default=TOKEN_ENV_DEFAULT, show_default=True, help="Environment variable holding the API token."
    )(f)
    f = click.option("--project", "project_id", type=int, default=None, help="Project id for --from.")(f)
    f = click.option(
        "--from", "from_url", default=None, metavar="URL", help="Pull the export from a running Label Studio."
    )(f)
    return click.argument("export_file", required=False, type=click.Path(dir_okay=False))(f)


@annotate.command("import")
@_source_options
@click.option(
    "--out",
    "out_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="Pairs (JSONL) a spec reads with preset: pairs.",
)
@click.option(
    "--policy",
    type=click.Choice(["majority", "unanimous", "all"]),
    default="majority",
    show_default=True,
    help="One row per task by majority or unanimity, or one row per annotation (all).",
)
@click.option(
    "--ties",
    type=click.Choice(["drop", "keep"]),
    default="drop",
    show_default=True,
    help="Drop ties, or keep them flagged tie: true.",
)
@click.option(
    "--rejects",
    "rejects_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Where the rejects go (default: beside --out, NAME.rejects.jsonl).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def import_(
    export_file: str | None,
    from_url: str | None,
    project_id: int | None,
    token_env: str,
    export_type: str,
    out_path: str,
    policy: str,
    ties: str,
    rejects_path: str | None,
    as_json: bool,
) -> None:
    """Turn a Label Studio export (JSON or JSON_MIN) into training pairs, with a rejects file."""
    from rmspec.annotate import kinds
    from rmspec.annotate.aggregate import aggregate
    from rmspec.rundir import atomic_write_text

    tasks = _load_tasks(export_file, from_url, project_id, token_env, export_type)
    unread = {t.kind for t in tasks if (kind := kinds.get(t.kind)) is not None and not kind.reads}
    if unread:  # a kind recognised but not read yet (process): said, instead of rows with empty responses
        raise RmspecError(
            "this export holds per-step (process) tasks; `annotate import` turns pairwise and "
            "pointwise labels into rows, not first_error labels yet",
            "read each task's first_error from the export: steps before it are correct, it is wrong",
        )
    result = aggregate(tasks, policy, ties)
    out = Path(out_path)
    rejects = Path(rejects_path) if rejects_path else out.with_name(out.stem + ".rejects.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in result.rows))
    atomic_write_text(rejects, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in result.rejects))
    if as_json:
        click.echo(json.dumps({**result.counts, "out": str(out), "rejects": str(rejects)}, indent=1))
        return
    from rmspec.render.annotate_view import print_import

    print_import(result.counts, str(out), str(rejects))


@annotate.command()
@_source_options
@click.option(
    "--model", "model", default=None, help="Also report this run's or model's agreement with the majority label."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def agreement(
    export_file: str | None,
    from_url: str | None,
    project_id: int | None,
    token_env: str,
    export_type: str,
    model: str | None,
    as_json: bool,
) -> None:
    """Cohen's kappa per annotator pair, Fleiss' kappa, Krippendorff's alpha; each annotator vs the majority."""
    from rmspec.annotate.agreement import agreement as compute
    from rmspec.annotate.agreement import labels_by_task
    from rmspec.extras import need, require

    require([need("rmspec annotate agreement", "annotate", ("statsmodels", "krippendorff", "sklearn"))])
    tasks = _load_tasks(export_file, from_url, project_id, token_env, export_type)
    scores = None
    if model:
        from rmspec.annotate.select import load_engine, margins

        labelled = [t for t in tasks if t.task_id in labels_by_task(tasks)]
        items = [{"prompt": t.prompt, "first": t.responses()[0], "second": t.responses()[1]} for t in labelled]
        scores = dict(zip([t.task_id for t in labelled], margins(load_engine(model), items)))
    report = compute(tasks, scores)
    if as_json:
        click.echo(json.dumps(report, indent=1, ensure_ascii=False))
        return
    from rmspec.render.annotate_view import print_agreement

    print_agreement(report)
    sys.stdout.flush()
