"""The training child the launch command runs, in each process `accelerate launch` starts, or alone for one
process: `-m rmspec.launch.entrypoint RUN/plan.json [--resume]`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rmspec.launch.entrypoint", description="Train the run of a plan.")
    parser.add_argument("plan", help="RUN/plan.json written by `rmspec run`")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint of the run")
    args = parser.parse_args(argv)

    from rmspec.errors import RmspecError
    from rmspec.train.run import train_run

    try:
        return train_run(args.plan, resume=args.resume)
    except RmspecError as exc:
        print(exc.render_plain(), file=sys.stderr, flush=True)
        return exc.exit_code
    finally:
        _leave_process_group()


def _leave_process_group() -> None:
    """Tear the process group down before exit: a gloo group left to the interpreter's exit can
    abort a finished rank ("terminate called without an active exception", SIGABRT), and the
    launcher then reports a successful run as failed."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
