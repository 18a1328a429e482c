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
    "eval": ("rmspec.cli.eval_cmd:eval_", "Score a run or any HF reward model on benchmarks."),
    "report": ("rmspec.cli.report_cmd:report", "Render the report of a run directory again."),
    "score": ("rmspec.cli.score_cmd:score", "Score a file of responses (or pairs) with a reward model or judge."),
    "serve": ("rmspec.cli.serve_cmd:serve", "Serve a reward model over HTTP (OpenRLHF, vLLM, OpenAI protocols)."),
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
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # not built yet
                return None
            raise
        return getattr(module, attr)

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
