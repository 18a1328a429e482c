"""rmspec: a declarative, no-code trainer for reward models."""

__version__ = "0.1.0"

# The approach registry loads first (light: pydantic, no torch): the spec's `approach:` union is built
# from its sections, the plugins' included (the `rmspec.approaches` entry points, RMSPEC_APPROACHES),
# so that every command, test and training process reads the same spec. A plugin that does not load
# stops here with the CLI's error form (exit 2), not a traceback.
from rmspec.errors import RmspecError as _RmspecError

try:
    from rmspec import approaches as _approaches
except _RmspecError as _exc:
    import sys

    sys.stderr.write(_exc.render_plain() + "\n")
    raise SystemExit(_exc.exit_code) from None

# Whether an approach trains on images is its declaration's answer; the spec's checks (below the
# registry) ask it through this, so `validate` refuses image data for an approach that does not read it.
from rmspec.spec.image_rules import ask_declarations as _ask_declarations  # noqa: E402
from rmspec.spec.image_rules import use_image_refusal as _use_image_refusal  # noqa: E402

_use_image_refusal(_ask_declarations(_approaches))
