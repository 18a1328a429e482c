"""What several approaches' own rules read of a spec (each approach's rules are in its module under
rmspec/approaches/, called from its section's `problems`): whether the model looks like an encoder,
and each dataset's mapping. The rules that do not depend on the approach (a filter or preset for
other rows, a margin no loss reads) are in rmspec.spec.rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmspec.spec.root import Spec


ENCODER_HINTS = ("bert", "minilm", "deberta", "roberta", "electra", "mpnet", "e5-", "bge-")


def looks_encoder(spec: Spec) -> bool:
    if spec.model.shape is not None:
        return spec.model.shape.architecture == "encoder"
    name = spec.model.name_or_path.lower()
    return any(h in name for h in ENCODER_HINTS)


def mappings(spec: Spec) -> Iterator[tuple[tuple, Any]]:
    """(path, mapping) of each dataset: data.mapping, or each data.sources[i].mapping of a mixture."""
    if spec.data.sources is None:
        yield ("data", "mapping"), spec.data.mapping
    else:
        for i, entry in enumerate(spec.data.sources):
            yield ("data", "sources", i, "mapping"), entry.mapping
