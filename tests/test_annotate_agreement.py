"""Agreement figures against cases computed by hand and against the reference packages."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from helpers.annotate import export_of
from rmspec.annotate.agreement import agreement, model_agreement
from rmspec.annotate.exports import parse_export


def test_cohen_kappa_by_hand():
    # Two annotators, 10 tasks: agree on 8 (6 first, 2 second); disagree on 2 (first/second, second/first).
    # p_o = 0.8; marginals: A first 7/10, second 3/10; B first 7/10, second 3/10.
    # p_e = 0.7*0.7 + 0.3*0.3 = 0.58; kappa = (0.8 - 0.58) / (1 - 0.58) = 0.22 / 0.42.
    labels = (
        [{1: "first", 2: "first"}] * 6
        + [{1: "second", 2: "second"}] * 2
        + [{1: "first", 2: "second"}, {1: "second", 2: "first"}]
    )
    report = agreement(parse_export(export_of(labels)))
    (row,) = report["cohen"]
    assert row["items"] == 10 and row["observed"] == pytest.approx(0.8)
    assert row["kappa"] == pytest.approx(0.22 / 0.42, abs=1e-6)


def test_fleiss_kappa_by_hand():
    # 4 tasks x 3 raters; counts per category (first, second, tie): (3,0,0) (0,3,0) (2,1,0) (1,1,1).
    # P_i = (sum n_ij^2 - 3) / 6: 1, 1, (4+1-3)/6 = 1/3, 0  -> P_bar = 7/12.
    # p_j = (6/12, 5/12, 1/12) -> P_e = (36 + 25 + 1) / 144 = 62/144.
    # kappa = (7/12 - 62/144) / (1 - 62/144) = (84 - 62) / (144 - 62) = 22/82.
    labels = [
        {1: "first", 2: "first", 3: "first"},
        {1: "second", 2: "second", 3: "second"},
        {1: "first", 2: "first", 3: "second"},
        {1: "first", 2: "second", 3: "tie"},
    ]
    report = agreement(parse_export(export_of(labels)))
    assert report["fleiss"]["items"] == 4 and report["fleiss"]["kappa"] == pytest.approx(22 / 82, abs=1e-6)


def test_krippendorff_alpha_by_hand():
    # Two raters, 4 units: (first, first) (first, first) (second, second) (first, second).
    # Pairable values: 8; n_first = 5, n_second = 3. D_o = 2 * 1 / 8 (one disagreeing unit, 2 ordered pairs,
    # each unit has m_u - 1 = 1): coincidences o_fs = o_sf = 1 -> D_o = 2/8.
    # D_e = 2 * 5 * 3 / (8 * 7) = 30/56. alpha = 1 - (2/8) / (30/56) = 1 - 56/120 = 64/120.
    labels = [{1: "first", 2: "first"}, {1: "first", 2: "first"}, {1: "second", 2: "second"}, {1: "first", 2: "second"}]
    report = agreement(parse_export(export_of(labels)))
    assert report["krippendorff"]["alpha"] == pytest.approx(64 / 120, abs=1e-6)


def test_swap_is_undone_before_agreement():
    # The same preferences, clicked on opposite sides because the tasks were shown swapped: identical figures.
    labels = [{1: "first", 2: "first"}, {1: "second", 2: "first"}, {1: "tie", 2: "tie"}, {1: "second", 2: "second"}]
    plain = agreement(parse_export(export_of(labels)))
    swapped = agreement(parse_export(export_of(labels, swaps=[True, False, True, True])))
    assert plain["cohen"] == swapped["cohen"] and plain["krippendorff"] == swapped["krippendorff"]
    assert plain["cohen"][0]["observed"] == pytest.approx(0.75)


def test_cancelled_annotations_are_left_out():
    labels = [{1: "first", 2: "first"}, {1: "second", 2: "second"}, {1: "first", 2: "second"}]
    with_cancel = agreement(parse_export(export_of(labels, cancelled={0: [3], 1: [3]})))
    assert with_cancel["annotators"] == ["1", "2"] and with_cancel["annotations"] == 6


def test_against_reference_packages_on_random_data():
    import krippendorff
    import numpy as np
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    rng = random.Random(5)
    cats = ["first", "second", "tie"]
    labels, swaps = [], []
    for _ in range(40):
        truth = rng.choice(cats[:2])
        labels.append({a: truth if rng.random() < 0.7 else rng.choice(cats) for a in (1, 2, 3, 4)})
        swaps.append(rng.random() < 0.5)
    report = agreement(parse_export(export_of(labels, swaps)))
    code = {c: i for i, c in enumerate(cats)}
    grid = np.array([[code[v[a]] for v in labels] for a in (1, 2, 3, 4)])
    for row, (i, j) in zip(report["cohen"], itertools.combinations(range(4), 2)):
        assert row["kappa"] == pytest.approx(cohen_kappa_score(grid[i], grid[j], labels=[0, 1, 2]), abs=1e-6)
    table, _ = aggregate_raters(grid.T, n_cat=3)
    assert report["fleiss"]["kappa"] == pytest.approx(fleiss_kappa(table), abs=1e-6)
    alpha = krippendorff.alpha(reliability_data=grid.astype(float), level_of_measurement="nominal")
    assert report["krippendorff"]["alpha"] == pytest.approx(alpha, abs=1e-6)
    json.dumps(report)  # --json must serialize


def test_majority_and_model_agreement_by_hand():
    labels = [
        {1: "first", 2: "first", 3: "second"},
        {1: "second", 2: "second", 3: "second"},
        {1: "tie", 2: "tie", 3: "first"},
        {1: "first", 2: "second", 3: "tie"},
    ]
    report = agreement(parse_export(export_of(labels)))
    vs = {r["annotator"]: (r["items"], r["agreement"]) for r in report["versus_majority"]}
    # Majorities: first, second, tie, none. Annotator 3 matches only task 2.
    assert vs == {"1": (3, 1.0), "2": (3, 1.0), "3": (3, pytest.approx(1 / 3, abs=1e-6))}
    assert [d["source_id"] for d in report["disagreements"]] == ["s0", "s2", "s3"]
    # The model: task 1 first>second (right), task 2 first>second (wrong), tie/none tasks do not count.
    tasks = parse_export(export_of(labels))
    ids = [t.task_id for t in tasks]
    labelled = {t.task_id: {a.annotator: a.preference for a in t.annotations} for t in tasks}
    assert model_agreement(labelled, {ids[0]: (1.0, 0.0), ids[1]: (2.0, 1.0), ids[2]: (0.0, 1.0)}) == {
        "items": 2,
        "agreement": 0.5,
    }


def test_undefined_figures_say_why():
    report = agreement(parse_export(export_of([{1: "first", 2: "first"}, {1: "first", 2: "first"}])))
    assert report["cohen"][0]["kappa"] is None and "chance" in report["cohen"][0]["note"]
    assert report["fleiss"]["kappa"] is None and report["krippendorff"]["alpha"] is None
