"""Label Studio round trip, annotator agreement and active selection (`rmspec annotate`).

- `kinds`: the task kinds (pairwise, pointwise, process), one module each: what differs between
  them, asked by the modules below instead of comparing kind names;
- `records`: the task fields rmspec writes, a task and an annotation as read back, a reject;
- `source`: the rows to label (a spec's data after mapping and filters, or a file of rows);
- `tasks`: Label Studio tasks (A/B order seeded per row, swap and source id in `data` and `meta`);
- `label_config`: the labelling interface (pairwise + tie, or a rating per attribute);
- `push`: create or update a project and import tasks through `label-studio-sdk`;
- `exports`: read a JSON or JSON_MIN export, validate every result, undo the swap;
- `aggregate`: one training pair per task (majority, unanimous) or per annotation (all), rejects;
- `agreement`: Cohen, Fleiss, Krippendorff on the unswapped preference; annotator vs majority;
- `select`: the pairs worth labelling under a model (uncertain, disagree, random).

Light at import time: numpy/sklearn/statsmodels/krippendorff and torch load inside the functions.
"""
