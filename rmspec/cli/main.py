"""The `rmspec` command group.

Subcommands load lazily (module path below) so that `rmspec --help`, `validate`, `plan`
and `init` never import torch: only the command that runs pulls in its module.
"""

from __future__ import annotations

import importlib
import sys

import click

from rmspec import __version__

COMMANDS = {
    "init": ("rmspec.cli.init_cmd:init", "Write a commented spec for an approach, data preset and model."),
    "validate": ("rmspec.cli.validate_cmd:validate", "Check a spec: every problem at once, located in the file."),
    "schema": ("rmspec.cli.schema_cmd:schema", "Export (or --check) the spec's JSON Schema."),
    "plan": ("rmspec.cli.plan_cmd:plan", "Dry run: memory per device, strategy, batch math, launch command."),
    "data": ("rmspec.cli.data_cmd:data", "Preview the mapped rows or report on the data (rejects, lengths, quality)."),
    "run": ("rmspec.cli.run_cmd:run", "Train from a spec or a saved plan, then evaluate and report."),
    "sweep": ("rmspec.cli.sweep_cmd:sweep", "Search hyperparameters with Optuna: a run per trial, pruned, resumable."),
    "compare": ("rmspec.cli.compare_cmd:compare", "Runs side by side: spec differences, metrics, time, tokens."),
    "eval": ("rmspec.cli.eval_cmd:eval_", "Score a run or any HF reward model on benchmarks."),
    "report": ("rmspec.cli.report_cmd:report", "Render the report of a run directory again."),
    "annotate": (
        "rmspec.cli.annotate_cmd:annotate",
        "Label Studio round trip, annotator agreement, pairs worth labelling.",
    ),
    "score": ("rmspec.cli.score_cmd:score", "Score a file of responses (or pairs) with a reward model or judge."),
    "serve": ("rmspec.cli.serve_cmd:serve", "Serve a reward model over HTTP (OpenRLHF, vLLM, OpenAI protocols)."),
    "export": ("rmspec.cli.export_cmd:export", "Write the file verl or OpenRLHF imports to call `rmspec serve RUN`."),
    "status": ("rmspec.cli.status_cmd:status", "State of a run, local or SLURM: live or stopped, last checkpoint."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module_name, attr = target.split(":")
        # Every command module ships with the package: a missing one is a packaging bug, so the
        # import error propagates (main() turns it into a crash report) instead of "no such command".
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help from the table above, so --help imports no command module.
        rows = [(name, help_) for name, (_, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="rmspec")
def cli() -> None:
    """rmspec: a declarative trainer for reward models.

    Describe the job in one YAML spec; rmspec validates it, plans the hardware,
    trains, evaluates and reports.
    """


def main() -> None:
    from rmspec.errors import RmspecError

    global crash_report_dir
    crash_report_dir = None  # set by a command once it has a run directory
    try:
        cli.main(standalone_mode=False)
    except RmspecError as exc:
        from rmspec.render.errors import print_error

        print_error(exc)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception:  # a bug of ours: one line for the user, the whole traceback in a file
        path = write_crash_report()
        if path is None:  # nowhere to write it: better a traceback than none
            raise
        click.echo(f"internal error, please report: {path}", err=True)
        sys.exit(1)


# A command that has a run directory names it here, so that a crash report lands beside the run.
crash_report_dir: str | None = None


def write_crash_report() -> str | None:
    """Write the exception being handled, with the command line and versions, to a file: in the
    run directory when a command named one (``crash_report_dir``), else in the temp folder."""
    import os
    import platform
    import tempfile
    import time
    import traceback

    name = f"rmspec-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    text = (
        f"rmspec {' '.join(sys.argv[1:])}\nrmspec {__version__}, Python {platform.python_version()}, "
        f"{platform.platform()}\n\n{traceback.format_exc()}"
    )
    for folder in (crash_report_dir, tempfile.gettempdir()):
        if not folder:
            continue
        try:
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return path
        except OSError:
            continue
    return None
