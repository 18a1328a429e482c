"""Exports of a trained reward model for engines that are not rmspec (`rmspec export --to vllm`).

- `vllm`: the folder vLLM loads as a pooling model with the reward rmspec evaluated, its serve.sh,
  README and OpenRLHF reward function; or the reason it cannot be hosted;
- `vllm_check`: the parity check (`--check`): the real engine started on that folder, compared row
  by row with `rmspec score`, with `check_rows` (the run's held-out rows it sends) and `check_dtype`
  (the precision it starts vLLM in and the tolerance it judges by);
- `vllm_engine`: `rmspec serve --engine vllm|auto`: the same folder (linked, in RUN/vllm_engine) served by a
  vLLM process rmspec starts and owns (rmspec.inference.engine_vllm), attached to the loaded scorer;
- `vllm_steps`: a process reward model's folder (the token classifier, its step read points, prm_client.py),
  and `vllm_steps_check` its `--check` step by step, on `check_step_rows`.
"""
