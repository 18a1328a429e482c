"""`rmspec sweep`: a hyperparameter search over a spec with Optuna, and `rmspec compare` of its runs.

- layout: the sweep directory (study, sweep.json, best.yaml, report.html, trials/NNN, locks/, jobs/);
- storage: where the study lives (sqlite, journal, an RDB URL) and how to open it;
- space: the spec's sweep section in Optuna's terms (distributions, sampler, pruner);
- state: one open sweep (spec, directory, study, the lock on this process's Optuna calls);
- trial: one run of a trial, an ordinary `rmspec run` in a subprocess of its own session, pruned from its
  metrics.jsonl; jobs: the same run as a one-node SLURM job;
- devices: which GPUs or cores each of the trials running at once on this host gets;
- owners: who still runs a trial's run directory after its sweep died (locks, processes, SLURM jobs);
- opening: claiming the sweep directory (alone or --join), creating or reopening the study (resume);
- driver: the loop, ask/tell in this process, `parallel` trials at once, adopting a dead worker's trials;
- workers: the trials this process runs at once (threads, children, jobs, the device pool);
- trial_runs: one trial, start to tell, each seed's run waited for, read, resumed or re-run;
- launching: one run of a trial planned, then run as a SLURM job or here on the granted devices;
- outputs, noise, report: sweep.json (with each objective's standard error), best.yaml, importances and
  report.html at the end;
- budget: what `rmspec plan` shows of a sweep (light: no Optuna);
- compare: runs side by side (light).
The parent stays light (no torch): trials train in their own processes.
"""
