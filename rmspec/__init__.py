"""rmspec: a declarative, no-code trainer for reward models."""

import os

__version__ = "0.1.0"

# Approach plugins (rmspec.approaches: RMSPEC_APPROACHES) register before any spec is read, so that
# the spec's `approach:` accepts their kind in every command and in the training processes.
if os.environ.get("RMSPEC_APPROACHES"):
    from rmspec import approaches as _approaches  # noqa: F401
