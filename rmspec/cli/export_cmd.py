"""`rmspec export RUN --to verl|openrlhf -o FILE|DIR`: what an RL trainer needs to use a run.

The run's approach declares its exporter (rmspec.approaches.base.Approach.exporter: "module:function(
run, target, out) -> path", its targets, and whether -o names a file or a directory), or, for a
document that trains nothing, its document kind (rmspec.documents.base.DocumentKind.exporter). A composite run
exports a client of `rmspec serve RUN` (one Python file); a judge trained by GRPO (a run or its spec)
exports its training for verl (a directory: Parquet data, compute_score.py, the main_ppo command).
Only the chosen exporter's module is imported.

`--to vllm` is not an approach's exporter: any run whose scorer vLLM can host (rmspec.export.vllm)
becomes a folder vLLM serves as a pooling model; `--check` starts the real engine on it and compares
with `rmspec score` on the run's held-out rows (rmspec.export.vllm_check): exit 1 when the largest
difference is over the tolerance (1e-4 in float32; rmspec.export.check_dtype for bfloat16). A process
reward model becomes the token classifier vLLM serves with token_classify, with its step read points and
a client (rmspec.export.vllm_steps); its check compares every step (rmspec.export.vllm_steps_check).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rmspec import approaches
from rmspec.errors import RmspecError
from rmspec.export.check_dtype import BF16_RELATIVE, DTYPES, TOLERANCE_FP32
from rmspec.export.check_rows import DEFAULT_LIMIT

if TYPE_CHECKING:
    from rmspec.approaches.base import Approach
    from rmspec.documents.base import DocumentKind

TARGETS = ("verl", "openrlhf", "vllm")


def run_approach(run: Path) -> Approach | DocumentKind:
    """What declares the exporter: a run directory's or a spec file's approach, or the document kind of
    one that trains nothing (a composite)."""
    from rmspec import documents

    declared = documents.of_path(run)
    if declared is not None and not declared.trains:
        return declared
    if not run.is_file() and not (run / "spec.yaml").is_file():
        raise RmspecError(f"{run}: not a run directory (no spec.yaml)", "give the directory `rmspec run` wrote")
    if run.is_file():
        from rmspec.spec import load_spec

        return approaches.of(load_spec(run).spec)
    from rmspec.rundir.spec import load_run_spec

    return approaches.of(load_run_spec(run).spec)


def to_vllm(
    folder: Path,
    path: Path,
    overwrite: bool,
    check: bool,
    python: str | None,
    rows: str | None,
    limit: int,
    dtype: str,
) -> None:
    """`--to vllm`: the folder (rmspec.export.vllm), then the parity check if asked."""
    import shutil

    path = path.resolve()  # the served model name and the paths written into serve.sh/README

    from rmspec.export.vllm import EXPORT_FILE, export_vllm
    from rmspec.inference.engine import load_scorer

    if path.exists():
        if not (path / EXPORT_FILE).is_file():
            raise RmspecError(
                f"-o {path}: exists and is not a folder `rmspec export --to vllm` wrote", "choose another -o"
            )
        if not overwrite:
            raise RmspecError(f"{path} already exists", "pass --overwrite to replace it, or choose another -o")
    rows_path = Path(rows) if rows else None
    if rows_path is not None and not rows_path.is_file():
        raise RmspecError(f"--check-rows {rows}: no such file", "give a JSONL file of held-out conversations")
    if check:  # before the model loads and the folder is written: a missing environment costs nothing
        from rmspec.inference.engine_vllm import vllm_python

        vllm_python(python)
    scorer = load_scorer(folder)
    from rmspec.inference import scorers

    steps = scorers.of(scorer).per_token  # a process reward model: per-step rewards (rmspec.export.vllm_steps)
    if check:  # the rows first: a run without a held-out split is refused before anything is written
        from rmspec.export.check_image_rows import image_check_rows
        from rmspec.export.check_rows import check_rows
        from rmspec.export.check_step_rows import step_check_rows

        chosen: Any = (
            step_check_rows(folder, rows_path, limit)
            if steps
            else image_check_rows(folder, rows_path, limit)  # pictures travel with the rows
            if scorers.of(scorer).reads_images
            else check_rows(folder, rows_path, limit)
        )
    if path.exists():
        shutil.rmtree(path)
    if steps:
        from rmspec.export.vllm_hosting import engine_architecture
        from rmspec.export.vllm_steps import export_steps

        host = export_steps(folder, path, scorer, engine_architecture(folder, scorer, per_token=True))
    elif scorers.of(scorer).reads_images:  # a vision-language reward model (rmspec.export.vllm_vision)
        from rmspec.export.vllm_hosting import hosting
        from rmspec.export.vllm_vision import export_vision

        host = export_vision(folder, path, scorer, hosting(folder, scorer))
    else:
        host = export_vllm(folder, path, scorer)
    client = "prm_client.py (per-step rewards)" if steps else "openrlhf_reward.py"
    if host.images is not None:  # a vision-language reward model (rmspec.export.vllm_vision): no text client
        images = host.images
        client = (
            f"pixel bounds {images['min_pixels']}-{images['max_pixels']}"
            if "min_pixels" in images
            else f"{images['family']} processor settings as trained"
        )
    click.echo(f"wrote {path} ({host.architecture} for vLLM): serve.sh, README.md, {client}", err=True)
    if not check:
        return
    from rmspec.export.vllm_check import run_check, write_report

    if steps:
        from rmspec.export.vllm_steps_check import run_step_check

        report = run_step_check(folder, path, host, scorer, python, chosen, dtype)
    else:
        report = run_check(folder, path, host, scorer.tokenizer, python, chosen, dtype)
    written = write_report(folder, path, report)
    click.echo(f"  rows: {report['rows_source']}", err=True)
    if report["rows_too_long"]:
        click.echo(f"  left out: {report['rows_too_long']} rows longer than max_length", err=True)
    for form, diff in {**report["per_form"], **report["not_supported_forms"]}.items():
        click.echo(f"  {form}: largest |vLLM - rmspec score| = {diff:.3g}", err=True)
    if "pairs_same_order" in report:
        order = report["pairs_same_order"]
        click.echo(f"  pairs in rmspec's order: {order['same_order']} of {order['pairs']}", err=True)
    if steps:
        click.echo(f"  steps compared: {report['steps_compared']}", err=True)
    verdict = "passed" if report["passed"] else "FAILED"
    click.echo(
        f"parity {verdict}: largest difference {report['max_abs_diff']:.3g} over {report['rows']} rows "
        f"({report['dtype']}, {report['dtype_reason']}; allowed {report['allowed_difference']:.3g}: "
        f"{report['rule']}); written to {written}"
    )
    if not report["passed"]:
        raise SystemExit(1)


@click.command("export")
@click.argument("run", type=click.Path())
@click.option(
    "--to",
    "target",
    type=click.Choice(TARGETS),
    required=True,
    help="The RL trainer the file is for, or vllm: a folder vLLM serves as a pooling reward model.",
)
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(),
    required=True,
    help="What to write: FILE.py (a composite's client) or DIR (a GRPO judge's data, reward and verl command).",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing FILE (or a folder an earlier --to vllm wrote).")
@click.option(
    "--check",
    is_flag=True,
    help="--to vllm: start vLLM on the folder, compare with `rmspec score` on the run's held-out rows; "
    "exit 1 above the tolerance (see --dtype).",
)
@click.option(
    "--vllm-python",
    type=click.Path(),
    default=None,
    help="--check: the python of vLLM's environment (default $RMSPEC_VLLM_PYTHON, else /opt/rmspec-vllm/bin/python).",
)
@click.option(
    "--check-rows",
    type=click.Path(),
    default=None,
    help="--check: JSONL of conversations (prompt + response, or messages; a process reward model: prompt + "
    "steps); default: the run's validation split (a bare model folder: built-in rows).",
)
@click.option(
    "--check-limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="--check: at most this many rows (both responses of pairs spread evenly over the split).",
)
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default="auto",
    show_default=True,
    help="--check: vLLM's precision. auto: bfloat16 where vLLM's environment has a GPU, else float32. "
    f"Tolerance: {TOLERANCE_FP32:g} in float32; in bfloat16 {BF16_RELATIVE:g} x the rows' largest |reward| "
    "(at least 1).",
)
def export(
    run: str,
    target: str,
    out: str,
    overwrite: bool,
    check: bool,
    vllm_python: str | None,
    check_rows: str | None,
    check_limit: int,
    dtype: str,
) -> None:
    """Write the file TRAINER imports to call `rmspec serve RUN` (URL and token from RMSPEC_REWARD_URL, RMSPEC_REWARD_TOKEN),
    or (--to vllm) the folder vLLM serves with the run's reward."""
    folder, path = Path(run), Path(out)
    if not folder.exists():
        raise RmspecError(f"{run}: no such run directory or spec", "give the directory `rmspec run` wrote (runs/NAME)")
    from rmspec.cli.extras_check import require_for_target

    require_for_target(folder)  # a composite's rules: what the exported client calls must score
    if target == "vllm":
        to_vllm(folder, path, overwrite, check, vllm_python, check_rows, check_limit, dtype)
        return
    if check or vllm_python or check_rows or check_limit != DEFAULT_LIMIT or dtype != "auto":
        raise RmspecError(
            "--check, --vllm-python, --check-rows, --check-limit and --dtype are for --to vllm", "leave them out"
        )
    if path.exists() and not overwrite:
        raise RmspecError(f"{out} already exists", "pass --overwrite to replace it, or choose another -o")
    declared = run_approach(folder)
    kind, writes, targets = declared.name, declared.export_writes, declared.export_targets
    if declared.exporter is None:
        from rmspec import documents

        exportable = [n for n in approaches.names() if approaches.get(n).exporter is not None]
        exportable += [k.name for k in documents.own_kinds() if k.exporter is not None]
        raise RmspecError(
            f"{run}: approach {kind!r} has no exporter (exportable: {', '.join(exportable)})",
            "serve the model with `rmspec serve RUN` and use the trainer's HTTP reward-model client instead",
        )
    if target not in targets:
        raise RmspecError(f"approach {kind!r} exports to {', '.join(targets)}, not {target}", f"use --to {targets[0]}")
    if writes == "file" and path.suffix != ".py":
        raise RmspecError(f"-o {out}: the trainer imports a Python file", "name it FILE.py")
    if writes == "dir" and path.suffix:
        raise RmspecError(
            f"-o {out}: approach {kind} writes a directory (Parquet, compute_score.py, the command)",
            "name a directory, e.g. -o verl_export",
        )
    if writes == "file" and folder.is_file():
        raise RmspecError(f"{run}: approach {kind} exports a run, not a spec", "run it first, then export runs/NAME")
    written = declared.hook("exporter")(folder, target, path)
    if writes == "file":
        click.echo(f"wrote {written} ({target}); start the server with: rmspec serve {folder}", err=True)
    else:
        click.echo(
            f"wrote {written} ({target}): train.parquet, validation.parquet, compute_score.py; run: {written}/train_verl.sh",
            err=True,
        )
