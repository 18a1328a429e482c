"""Length-sorted scoring batches, bounded by their rows and by their padded attention mask.

Rows of different lengths in one batch are padded on the right, and transformers then hands SDPA a mask of
[rows, 1, width, width] (a bool mask, which the kernel turns into a float one): quadratic in the width, and the
kernel computes every score of it, the causal upper half included. A batch without padding (one row, or rows of
one length) gets no mask and attends causally, linear in memory. So a padded batch is cut where its mask would
pass ``MASK_ELEMENTS``, and a long row is scored on its own: at 8,192 tokens, 4 rows in one padded batch took 3.2x
the memory of 4 batches of one and 2.6x their time on CPU (bench/results/long_row_scoring.md). Rows short enough
(32 rows up to 1,448 tokens) batch as before. The scores do not change: a row's score does not depend on its
batch (tests/test_scoring_batches.py).

Pure Python (no torch), shared by every scorer that pads (rmspec.inference.scoring, rmspec.inference.process,
a judge's generation in rmspec.inference.judge, whose prefill pads on the left) and by the padding accounting of
rmspec.inference.scorers.reward. Prompt-once scoring (rmspec.inference.shared_prefix) holds its packed rows to the
same budget where they attend through their mask (a GPU, or rows of 512 columns or fewer), and scores a group too
wide for it one response at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

# rows x width x width of one padded batch's mask: 64 Mi elements, about 320 MiB as SDPA holds it on CPU (a bool
# mask and its float copy: 5 bytes an element, measured), 4 rows of 4,096 tokens, 32 of 1,448.
MASK_ELEMENTS = 1 << 26


def length_batches(lengths: Sequence[int], batch_size: int, mask_elements: float | None = None) -> list[list[int]]:
    """Indices into ``lengths``, sorted by length and cut into batches of at most ``batch_size`` rows whose padded
    mask (rows x longest x longest, only where the rows differ in length) stays within ``mask_elements``
    (MASK_ELEMENTS unless given)."""
    budget = MASK_ELEMENTS if mask_elements is None else mask_elements
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        width = lengths[index]  # sorted: the longest of the batch so far
        rows = len(current) + 1
        padded = bool(current) and lengths[current[0]] != width
        if current and (rows > batch_size or (padded and rows * width * width > budget)):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
