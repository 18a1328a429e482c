"""Launching a plan: claim and write the run directory, run the plan's argv (built by the planner,
`rmspec.plan.argv`) here or through SLURM, and the child entrypoint (heavy).

Importing this package imports nothing heavy; `rmspec.launch.entrypoint` is the module that
`accelerate launch -m` runs in each process.
"""
