"""One module per benchmark kind, each with a `KIND` object (rmspec.evaluate.kinds.base).

The kinds are listed in rmspec/spec/benchmarks.py (CATALOGUE) and looked up through
rmspec.evaluate.registry; nothing else names them. Light at import: `datasets` and numpy load
inside the functions that need them.
"""
