"""Training objectives beyond plain Bradley-Terry, one module per recipe (issue 21).

- `listwise`: Plackett-Luce over N >= 2 ranked responses per prompt, and ranking metrics.
- `ties`: the Davidson (1970) ties model for Bradley-Terry, and tie calibration.
- `margins`: subtracted (Llama 2) and scaled (HelpSteer2-Preference, INF-ORM) margins, margin_map.
- `sft`: the language-model loss on the chosen response's tokens (GRM's regularizer).
- `odin`: ODIN's two-head length debiasing (Chen et al. 2024).
- `ensemble`: reductions over ensemble members and seeded bootstrap resamples.

These are pure functions of tensors; the trainers decide which to call. The plain Bradley-Terry
loss and the pointwise losses stay in `rmspec.train.losses`.
"""
