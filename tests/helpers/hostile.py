"""The spec and rows that tests/test_hostile_input.py and bench/hostile_input.py feed to rmspec
(both measure the same input: the bench times what the tests assert)."""

from __future__ import annotations

# DATA is replaced by the data file's name.
SPEC = """\
version: 1
name: t
model:
  name_or_path: sentence-transformers/all-MiniLM-L6-v2
data:
  source:
    kind: files
    paths: [DATA]
  mapping:
    preset: pairs
approach:
  kind: bradley_terry
training:
  epochs: 1
  global_batch_size: 4
  max_length: 64
hardware:
  device: cpu
"""

ROWS = [{"prompt": f"question {i}?", "chosen": f"a good answer {i}", "rejected": f"bad {i}"} for i in range(6)]
