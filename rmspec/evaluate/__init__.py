"""Evaluation: official benchmark scoring, diagnostics, results and reports.

Each benchmark kind is one module under `kinds/`, listed in rmspec/spec/benchmarks.py and found
through `registry`. Light at import: the scoring rules, diagnostics and report read plain
numbers and JSON; loading a benchmark (`datasets`) and scoring it (torch/transformers, in
`run_level`, `process_run`, `validation`) import what they need inside the functions.
"""
