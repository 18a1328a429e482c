"""`rmspec score`: a file of responses (or pairs) scored by a reward model or judged by a judge.

Scores come from rmspec.inference's engine, so a row's reward equals `rmspec eval` and
`rmspec serve` for the same text. Modules:

- `reader`: JSONL / JSON / Parquet / CSV / `save_to_disk` folders, streamed row by row;
- `shapes`: which columns hold prompt, response, chosen, rejected or messages (detected or
  `--columns`), and why a row cannot be scored (rmspec.inference.scorers.shapes, re-exported);
  what each scorer kind reads and writes is its module's (rmspec.inference.scorers);
- `output`: the scored file, the rejects file, and the progress record that `--resume` reads;
- `runner`: bounded chunks, length-sorted batches inside each, results back in input order.
"""
