"""The scorer kinds (reward, pointwise, judge, process, composite): one module each, and their registry."""
