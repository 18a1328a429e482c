"""rmspec: a declarative, no-code trainer for reward models."""

__version__ = "0.1.0"

# The approach registry loads first (light: pydantic, no torch): the spec's `approach:` union is built
# from its sections, the plugins' included (the `rmspec.approaches` entry points, RMSPEC_APPROACHES),
# so that every command, test and training process reads the same spec. A plugin that does not load
# stops here with the CLI's error form (exit 2), not a traceback.
from rmspec.errors import RmspecError as _RmspecError

try:
    from rmspec import approaches as _approaches  # noqa: F401
except _RmspecError as _exc:
    import sys

    sys.stderr.write(_exc.render_plain() + "\n")
    raise SystemExit(_exc.exit_code) from None
