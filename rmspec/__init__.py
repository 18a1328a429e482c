"""rmspec: a declarative, no-code trainer for reward models."""

import os

__version__ = "0.1.0"

# Approach plugins (rmspec.approaches: RMSPEC_APPROACHES) register before any spec is read, so that
# the spec's `approach:` accepts their kind in every command and in the training processes. A name
# that does not load stops here with the CLI's error form (exit 2), not a traceback.
if os.environ.get("RMSPEC_APPROACHES"):
    from rmspec.errors import RmspecError

    try:
        from rmspec import approaches as _approaches  # noqa: F401
    except RmspecError as _exc:
        import sys

        sys.stderr.write(_exc.render_plain() + "\n")
        raise SystemExit(_exc.exit_code) from None
