"""`rmspec sweep`: a hyperparameter search over a spec with Optuna, and `rmspec compare` of its runs.

- layout: the sweep directory (study.db, sweep.json, best.yaml, report.html, trials/NNN);
- space: the spec's sweep section in Optuna's terms (distributions, sampler, pruner);
- trial: one run of a trial, an ordinary `rmspec run` in a subprocess, pruned from its metrics.jsonl;
- driver: ask/tell in this process, resume, the live table;
- outputs, report: sweep.json, best.yaml, importances and report.html at the end;
- budget: what `rmspec plan` shows of a sweep (light: no Optuna);
- compare: runs side by side (light).
The parent stays light (no torch): trials train in their own processes.
"""
