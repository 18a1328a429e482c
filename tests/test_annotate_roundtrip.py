"""The Label Studio round trip against a REAL server (label-studio 1.23.2 in .venv-label-studio/):
export + push through the SDK, three annotators label through the API, export (JSON and
JSON_MIN), `annotate import`, `annotate agreement`, and a spec trains on the imported pairs.

Skips (saying why) where Label Studio is not installed; fails instead under CI=true.
"""

from __future__ import annotations

import json
import time

import pytest

from helpers.ci import missing
from helpers.label_studio_server import initialized_data, missing_reason, new_token, server_from_copy
from helpers.models import build_model
from helpers.runs import SPEC, rmspec, write_pairs

pytestmark = pytest.mark.slow

# Source order: "first" is the source's chosen response. Per task (by row index): each
# annotator's label, "cancel" for a cancelled annotation, "bad" for a result the server
# accepts but the label config cannot produce (selected: "up").
PLAN = {
    **{i: ("first", "first", "first") for i in range(6)},
    6: ("first", "first", "bad"),
    7: ("first", "first", "second"),  # majority first, not unanimous
    8: ("first", "second", "tie"),  # no majority
    9: ("tie", "tie", "first"),  # majority tie
    10: ("cancel", "cancel", None),  # all cancelled
    11: (None, None, None),  # nobody
}
N_TASKS = 12


@pytest.fixture(scope="session")
def ls_template(tmp_path_factory):
    reason = missing_reason()
    if reason:
        missing(reason)
    token = new_token()
    root, seconds = initialized_data(tmp_path_factory.mktemp("ls-template"), token)
    print(f"\nLabel Studio first start (database set-up): {seconds:.1f} s")
    return root, token, seconds


@pytest.fixture(scope="module")
def label_studio(ls_template, tmp_path_factory):
    template, token, _ = ls_template
    server = server_from_copy(template, tmp_path_factory.mktemp("ls-run"), token)
    print(f"Label Studio start from a copied data dir: {server.start_seconds:.1f} s at {server.url}")
    yield server
    server.stop()


def _api(server):
    import httpx

    return httpx.Client(base_url=server.url, headers={"Authorization": f"Token {server.token}"}, timeout=60)


def _selected(preference: str, swapped: bool) -> str:
    """The side an annotator clicks for a source-order preference: A (left) unless swapped."""
    return "left" if (preference == "first") != swapped else "right"


def test_round_trip_through_a_real_label_studio(label_studio, tmp_path, cli, monkeypatch):
    t0 = time.time()
    write_pairs(tmp_path / "source.jsonl", N_TASKS, seed=3)
    source = {r["id"]: r for r in map(json.loads, (tmp_path / "source.jsonl").read_text().splitlines())}
    monkeypatch.setenv("LS_TEST_TOKEN", label_studio.token)

    # 1. export and push through the SDK
    pushed = cli(
        "annotate",
        "export",
        tmp_path / "source.jsonl",
        "--out",
        tmp_path / "ls",
        "--seed",
        "1",
        "--push",
        label_studio.url,
        "--token-env",
        "LS_TEST_TOKEN",
        "--project",
        "round trip",
    )
    assert pushed.code == 0, pushed.out + pushed.err
    assert f"{N_TASKS} of {N_TASKS} task(s) imported" in pushed.out and "created" in pushed.out
    written = json.loads((tmp_path / "ls" / "tasks.json").read_text())
    assert sum(t["meta"]["rmspec_swap"] for t in written) == N_TASKS // 2  # balanced A/B order
    # Pushing again updates the same project rather than making a second one.
    again = cli(
        "annotate",
        "export",
        tmp_path / "source.jsonl",
        "--out",
        tmp_path / "ls2",
        "--push",
        label_studio.url,
        "--token-env",
        "LS_TEST_TOKEN",
        "--project",
        "round trip",
    )
    assert again.code == 0 and "updated" in again.out, again.out + again.err

    api = _api(label_studio)
    projects = api.get("/api/projects/", params={"title": "round trip"}).json()
    projects = projects["results"] if isinstance(projects, dict) else projects
    assert len([p for p in projects if p["title"] == "round trip"]) == 1
    pid = projects[0]["id"]
    tasks = api.get("/api/tasks/", params={"project": pid, "page_size": 1000}).json()
    tasks = sorted(tasks["tasks"] if isinstance(tasks, dict) else tasks, key=lambda t: t["id"])
    assert len(tasks) == 2 * N_TASKS  # the second push imported the tasks again
    # Drop the duplicates of the second push so each source row has one task.
    for t in tasks[N_TASKS:]:
        assert api.delete(f"/api/tasks/{t['id']}/").status_code == 204
    tasks = tasks[:N_TASKS]
    by_source = {t["meta"]["rmspec_id"]: t for t in tasks}
    assert set(by_source) == set(source)
    for sid, t in by_source.items():  # the server shows what the export wrote
        shown = (
            (t["data"]["response_b"], t["data"]["response_a"])
            if t["data"]["rmspec_swap"]
            else (t["data"]["response_a"], t["data"]["response_b"])
        )
        assert shown == (source[sid]["chosen"], source[sid]["rejected"])

    # 2. three annotators (users of the organization); the admin posts with completed_by
    org = api.get("/api/current-user/whoami").json()["active_organization"]
    users = []
    for k in range(3):
        made = api.post("/api/users/", json={"email": f"annotator{k}@example.com", "username": f"annotator{k}"})
        assert made.status_code == 201, made.text
        users.append(made.json()["id"])
        assert api.patch(f"/api/users/{users[-1]}/", json={"active_organization": org}).status_code == 200
    for index, labels in PLAN.items():
        task = by_source[f"r{index}"]
        swapped = task["data"]["rmspec_swap"]
        for user, label in zip(users, labels):
            if label is None:
                continue
            body = {"completed_by": user, "was_cancelled": label == "cancel", "result": []}
            if label == "tie":
                body["result"] = [
                    {"from_name": "tie", "to_name": "prompt", "type": "choices", "value": {"choices": ["tie"]}}
                ]
            elif label == "bad":
                body["result"] = [{"from_name": "pw", "to_name": "pw", "type": "pairwise", "value": {"selected": "up"}}]
            elif label in ("first", "second"):
                body["result"] = [
                    {
                        "from_name": "pw",
                        "to_name": "pw",
                        "type": "pairwise",
                        "value": {"selected": _selected(label, swapped)},
                    }
                ]
            posted = api.post(f"/api/tasks/{task['id']}/annotations/", json=body)
            assert posted.status_code == 201, posted.text
            assert posted.json()["completed_by"] == user

    # 3. export from the server (a file, as a user downloads it) and 4. import
    export = api.get(f"/api/projects/{pid}/export", params={"exportType": "JSON", "download_all_tasks": "true"})
    assert export.status_code == 200
    (tmp_path / "export.json").write_text(export.text)
    done = cli("annotate", "import", tmp_path / "export.json", "--out", tmp_path / "pairs.jsonl", "--json")
    assert done.code == 0, done.out + done.err
    counts = json.loads(done.out)
    assert counts["tasks_read"] == N_TASKS and counts["tasks_with_rows"] == 8
    assert counts["tasks_rejected"] == {"no_majority": 1, "tie": 1, "all_cancelled": 1, "no_annotation": 1}
    assert (
        counts["annotations_read"] == 32 and counts["annotations_cancelled"] == 2 and counts["annotations_invalid"] == 1
    )
    assert counts["annotations_valid"] == 29 and counts["votes"] == {"first": 24, "second": 2, "tie": 3}
    rows = [json.loads(x) for x in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(f"r{i}" for i in range(8))
    for r in rows:  # the swap is undone: every majority agrees with the source's chosen
        assert (r["chosen"], r["rejected"]) == (source[r["id"]]["chosen"], source[r["id"]]["rejected"])
        assert r["margin"] == (pytest.approx(1 / 3, abs=1e-5) if r["id"] == "r7" else 1.0)
        assert r["prompt"] == source[r["id"]]["prompt"] and r["tie"] is False
    assert {by_source[r["id"]]["data"]["rmspec_swap"] for r in rows} == {True, False}
    rejects = [json.loads(x) for x in (tmp_path / "pairs.rejects.jsonl").read_text().splitlines()]
    task_rejects = {r["source_id"]: r["reason"] for r in rejects if r["level"] == "task"}
    assert task_rejects == {"r8": "no_majority", "r9": "tie", "r10": "all_cancelled", "r11": "no_annotation"}
    bad = [r for r in rejects if r["level"] == "annotation"]
    assert len(bad) == 1 and bad[0]["source_id"] == "r6" and "'up'" in bad[0]["detail"]
    assert bad[0]["annotator"] == str(users[2])

    # Other policies on the same export: every count follows from PLAN.
    for args, expected_rows, ties_kept in (
        (("--policy", "unanimous"), 7, 0),
        (("--policy", "all"), 26, 0),
        (("--policy", "all", "--ties", "keep"), 29, 3),
        (("--ties", "keep"), 9, 1),
    ):
        other = cli("annotate", "import", tmp_path / "export.json", "--out", tmp_path / "other.jsonl", "--json", *args)
        assert other.code == 0, other.err
        c = json.loads(other.out)
        assert (c["rows_written"], c["ties_kept"]) == (expected_rows, ties_kept), args

    # JSON_MIN straight from the server (--from): no meta, so the swap comes from the data fields.
    # It leaves cancelled annotations out (measured on 1.23.2), so a task whose annotations were
    # all cancelled (r10) is not in it at all: JSON is the export whose counts cover every task.
    pulled = cli(
        "annotate",
        "import",
        "--from",
        label_studio.url,
        "--project",
        str(pid),
        "--token-env",
        "LS_TEST_TOKEN",
        "--format",
        "JSON_MIN",
        "--out",
        tmp_path / "min.jsonl",
        "--json",
    )
    assert pulled.code == 0, pulled.out + pulled.err
    cmin = json.loads(pulled.out)
    assert cmin["tasks_read"] == N_TASKS - 1 and cmin["annotations_read"] == 30 and cmin["annotations_cancelled"] == 0
    assert cmin["tasks_rejected"] == {"no_majority": 1, "tie": 1, "no_annotation": 1}
    min_rejects = [json.loads(x) for x in (tmp_path / "min.rejects.jsonl").read_text().splitlines()]
    assert {r["source_id"]: r["reason"] for r in min_rejects if r["level"] == "task"} == {
        "r8": "no_majority",
        "r9": "tie",
        "r11": "no_annotation",
    }
    assert [r["source_id"] for r in min_rejects if r["level"] == "annotation"] == [
        "r6"
    ]  # selected: "up" kept by JSON_MIN
    min_rows = [json.loads(x) for x in (tmp_path / "min.jsonl").read_text().splitlines()]
    strip = lambda r: (r["id"], r["chosen"], r["rejected"], r["margin"])  # noqa: E731
    assert sorted(map(strip, min_rows)) == sorted(map(strip, rows))

    # 5. agreement, checked against scikit-learn / statsmodels / krippendorff on the PLAN itself
    agreed = cli("annotate", "agreement", tmp_path / "export.json", "--json")
    assert agreed.code == 0, agreed.err
    report = json.loads(agreed.out)
    assert report["annotators"] == [str(u) for u in users] and report["annotations"] == 29
    expected = _expected_agreement()
    kappas = {(r["a"], r["b"]): r["kappa"] for r in report["cohen"]}
    for (i, j), value in expected["cohen"].items():
        assert kappas[(str(users[i]), str(users[j]))] == pytest.approx(value, abs=1e-6)
    assert report["krippendorff"]["alpha"] == pytest.approx(expected["alpha"], abs=1e-6)
    assert report["fleiss"]["kappa"] == pytest.approx(expected["fleiss"], abs=1e-6)
    assert report["fleiss"]["items"] == 9 and report["fleiss"]["raters_per_item"] == 3
    assert sorted(d["source_id"] for d in report["disagreements"]) == ["r7", "r8", "r9"]
    vs = {r["annotator"]: (r["items"], r["agreement"]) for r in report["versus_majority"]}
    # majority exists on r0-r7 and r9 (tie); r8 has none
    assert vs[str(users[0])] == (9, 1.0) and vs[str(users[1])] == (9, 1.0)
    assert vs[str(users[2])] == (8, pytest.approx(6 / 8))
    table = cli("annotate", "agreement", tmp_path / "export.json")
    assert table.code == 0 and "Krippendorff" in table.out and "Cohen" in table.out
    round_trip = time.time() - t0

    # 6. a spec trains on the imported pairs
    model = build_model("llama", tmp_path / "model-src")
    spec = tmp_path / "labelled.yaml"
    spec.write_text(
        SPEC.format(
            name="labelled",
            model=model,
            batch=2,
            procs=1,
            training="  max_steps: 2",
            out=tmp_path / "runs" / "labelled",
        )
        .replace("pairs.jsonl", str(tmp_path / "pairs.jsonl"))
        .replace("validation_fraction: 0.2", "validation_fraction: 0.25")
    )
    trained = rmspec("run", str(spec), cwd=tmp_path)
    run = tmp_path / "runs" / "labelled"
    assert trained.returncode == 0, trained.stdout + trained.stderr
    report_data = json.loads((run / "data_report.json").read_text())
    assert report_data["rows_read"] == 8 and report_data["rows_kept"] == 8
    assert json.loads((run / "status.json").read_text())["state"] == "completed"
    with_model = cli("annotate", "agreement", tmp_path / "export.json", "--model", run, "--json")
    assert with_model.code == 0, with_model.err
    assert json.loads(with_model.out)["model"]["items"] == 8  # non-tie majorities: r0-r7
    print(
        f"round trip (export, push, label, export, import x6, agreement): {round_trip:.1f} s; "
        f"with training: {time.time() - t0:.1f} s"
    )


def _expected_agreement() -> dict:
    """The figures from the PLAN (source order, invalid and cancelled left out) by the reference packages."""
    import krippendorff
    import numpy as np
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    code = {"first": 0, "second": 1, "tie": 2}
    grid = np.full((3, N_TASKS), np.nan)
    for index, labels in PLAN.items():
        for k, label in enumerate(labels):
            if label in code:
                grid[k, index] = code[label]
    cohen = {}
    for i, j in ((0, 1), (0, 2), (1, 2)):
        both = ~np.isnan(grid[i]) & ~np.isnan(grid[j])
        cohen[(i, j)] = cohen_kappa_score(grid[i, both], grid[j, both], labels=[0, 1, 2])
    full = ~np.isnan(grid).any(axis=0)
    table, _ = aggregate_raters(grid[:, full].T.astype(int), n_cat=3)
    multi = (~np.isnan(grid)).sum(axis=0) >= 2
    alpha = krippendorff.alpha(reliability_data=grid[:, multi], level_of_measurement="nominal", value_domain=[0, 1, 2])
    return {"cohen": cohen, "fleiss": fleiss_kappa(table), "alpha": alpha}


def test_pointwise_ratings_through_a_real_label_studio(label_studio, tmp_path, cli, monkeypatch):
    """A pointwise spec: one star rating per attribute on the spec's scale, back as averaged scores."""
    rows = [
        {"prompt": f"w{10 + i}", "response": f"w{20 + i} w{30 + i}", "helpfulness": 2, "correctness": 3}
        for i in range(3)
    ]
    (tmp_path / "hs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = tmp_path / "pointwise.yaml"
    spec.write_text(
        "version: 1\nname: pw\nmodel: {name_or_path: sentence-transformers/all-MiniLM-L6-v2}\n"
        "data:\n  source: {kind: files, paths: [hs.jsonl]}\n  mapping: {preset: helpsteer2}\n"
        "approach: {kind: pointwise, attributes: [helpfulness, correctness], scale: {min: 0, max: 4}}\n"
        "hardware: {device: cpu}\n"
    )
    monkeypatch.setenv("LS_TEST_TOKEN", label_studio.token)
    pushed = cli(
        "annotate",
        "export",
        spec,
        "--out",
        tmp_path / "ls",
        "--push",
        label_studio.url,
        "--token-env",
        "LS_TEST_TOKEN",
        "--project",
        "ratings",
    )
    assert pushed.code == 0 and "3 of 3 task(s) imported" in pushed.out, pushed.out + pushed.err
    api = _api(label_studio)
    pid = next(
        p["id"]
        for p in api.get("/api/projects/", params={"title": "ratings"}).json()["results"]
        if p["title"] == "ratings"
    )
    tasks = sorted(api.get("/api/tasks/", params={"project": pid}).json()["tasks"], key=lambda t: t["id"])
    me = api.get("/api/current-user/whoami").json()["id"]
    stars = {0: [(5, 1), (4, 1)], 1: [(3, 3)], 2: [(2, 9)]}  # task -> (helpfulness, correctness) stars per annotation
    for k, given in stars.items():
        for h, c in given:
            result = [
                {"from_name": "helpfulness", "to_name": "response", "type": "rating", "value": {"rating": h}},
                {"from_name": "correctness", "to_name": "response", "type": "rating", "value": {"rating": c}},
            ]
            posted = api.post(f"/api/tasks/{tasks[k]['id']}/annotations/", json={"result": result, "completed_by": me})
            assert posted.status_code == 201, posted.text
    for fmt in ("JSON", "JSON_MIN"):
        done = cli(
            "annotate",
            "import",
            "--from",
            label_studio.url,
            "--project",
            str(pid),
            "--token-env",
            "LS_TEST_TOKEN",
            "--format",
            fmt,
            "--out",
            tmp_path / f"{fmt}.jsonl",
            "--json",
        )
        assert done.code == 0, done.err
        counts = json.loads(done.out)
        assert counts["tasks_read"] == 3 and counts["tasks_with_rows"] == 2 and counts["annotations_invalid"] == 1, fmt
        out = {r["id"]: r for r in map(json.loads, (tmp_path / f"{fmt}.jsonl").read_text().splitlines())}
        ids = [t["data"]["rmspec_id"] for t in tasks]
        # stars -> scale 0..4 (1 star = 0): (5+4)/2 - 1 = 3.5, 1 - 1 = 0; 3 stars -> 2
        assert (out[ids[0]]["helpfulness"], out[ids[0]]["correctness"]) == (3.5, 0.0), fmt
        assert (out[ids[1]]["helpfulness"], out[ids[1]]["correctness"]) == (2.0, 2.0), fmt
        rejects = [json.loads(x) for x in (tmp_path / f"{fmt}.rejects.jsonl").read_text().splitlines()]
        assert any("from 1 to 5, got 9" in r["detail"] for r in rejects), fmt
