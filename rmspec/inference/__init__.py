"""The scoring engine: load a reward model or judge, encode as training did, score in batches.

Evaluation, `rmspec score`, `rmspec serve` and annotation's active selection all score through
this package, so a text gets the same score wherever it is computed. Modules:

- `target`: what MODEL_OR_RUN names (run directory or model folder); light, no torch;
- `loading`: a model folder loaded as training left it (pad token, right padding, length limit);
- `encoding`: (prompt, response) laid out and cut as the data pipeline does;
- `padding`: the right padding that training's collators use too;
- `batches`: length-sorted batches, bounded by rows and by their padded mask (long rows alone);
- `scoring`: length-sorted batched forward passes, results in input order;
- `engine`: `load_scorer` and `RewardEngine` by the names callers import;
- `scorers`: one module per scorer kind (reward, pointwise, judge, process, composite) and their
  registry: how each loads, reads a row or a request, scores a batch and describes its outputs;
- `judge`: generative judges (verdict generation and parsing).

Submodules import torch inside their functions; `import rmspec.inference` stays light.
"""
