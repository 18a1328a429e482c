"""The scorer kinds' registry (rmspec/inference/scorers): one home per scorer kind.

- Outside the home, no module compares with a scorer kind (scripts/check_scorer_kinds.py reads
  the syntax trees; no line is allowed: what a caller needs to know is a property of the kind).
- The registry is light, and each shipped kind is its module's `KIND`.
- A toy scorer kind from outside rmspec (tests/helpers/toy_scorer.py: one module, registered by one
  line) goes through `rmspec score`, its scores equal to an independent forward pass.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _checker():
    spec = importlib.util.spec_from_file_location("check_scorer_kinds", REPO / "scripts" / "check_scorer_kinds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_module_outside_the_home_compares_with_a_scorer_kind():
    found = [f"{rel}:{n}: {line}" for rel, n, line in _checker().find(REPO)]
    assert found == [], "ask rmspec.inference.scorers.of(engine) for a property of the kind instead:\n" + "\n".join(
        found
    )
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_scorer_kinds.py")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def test_the_check_finds_a_comparison_with_a_scorer_kind(tmp_path):
    """The scan is not vacuous: the comparisons this refactor removed are what it reports, aliases
    imported from another module included; evaluation's ScoredAs and other `kind`s are not."""
    package = tmp_path / "rmspec"
    package.mkdir()
    (package / "kinds.py").write_text(
        "from rmspec.spec.scorer_kind import ScorerKind\nJUDGE, PROCESS = ScorerKind.JUDGE, ScorerKind.PROCESS\n"
    )
    (package / "uses.py").write_text(
        "from rmspec.kinds import JUDGE\n"
        "from rmspec.spec.scorer_kind import ScorerKind\n"
        "from rmspec.spec.benchmarks import PROCESS\n"
        "def f(engine, entry, shape, source, scorer):\n"
        "    if engine.kind == ScorerKind.COMPOSITE:\n"  # 5
        "        pass\n"
        "    if scorer == JUDGE:\n"  # 7
        "        pass\n"
        '    if entry.get("scorer") == "process":\n'  # 9
        "        pass\n"
        "    process = engine.kind in (ScorerKind.PROCESS, ScorerKind.JUDGE)\n"  # 11
        "    table = {ScorerKind.REWARD: 1}\n"  # 12
        "    if scorer == PROCESS:\n"  # ScoredAs: not a scorer kind
        "        pass\n"
        '    if source.kind == "process":\n'  # an annotation task's kind, not a scorer's
        "        pass\n"
        "    if isinstance(engine, StepEngine):\n"  # 17: only with --types
        "        pass\n"
    )
    check = _checker()
    assert [n for rel, n, _ in check.find(tmp_path) if rel == "rmspec/uses.py"] == [5, 7, 9, 11, 12]
    assert [n for rel, n, _ in check.find(tmp_path, types=True) if rel == "rmspec/uses.py"] == [5, 7, 9, 11, 12, 17]
    assert check.main([str(tmp_path)]) == 1  # any line found fails the check: none is allowed


def test_the_registry_is_light_and_each_kind_is_its_module():
    code = (
        "import sys\n"
        "from rmspec.inference import scorers\n"
        "print(list(scorers.names()), [scorers.description(n) != '' for n in scorers.names()])\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    names, heavy = out.splitlines()
    assert (
        names.startswith("['composite', 'judge', 'process', 'vision_reward', 'pointwise', 'reward']")
        and "False" not in names
    )
    assert heavy == "False"

    from rmspec.inference import scorers

    for name, (module, _) in scorers.KINDS.items():
        kind = scorers.get(name)
        assert kind.kind == name and type(kind).__module__ == module
    with pytest.raises(ValueError, match="unknown scorer kind 'nope'"):
        scorers.get("nope")


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """A 2-layer BERT folder marked for the toy kind, and a copy without the mark."""
    from helpers.models import build_model

    folder = build_model("bert", tmp_path_factory.mktemp("toy") / "encoder")
    (folder / "toy_scorer.json").write_text("{}")
    return folder


def _rows(tmp_path: Path) -> Path:
    rows = [
        {"id": 0, "prompt": "what is two plus two", "response": "four"},
        {"id": 1, "prompt": "name a colour", "response": "blue is a colour of the sky"},
        {"id": 2, "prompt": "a question with no answer"},  # rejected: no response
        {"id": 3, "prompt": "say hello", "response": "hello hello hello"},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _independent(folder: Path, pairs: list[tuple[str, str]]) -> list[float]:
    """Plain transformers, one text at a time (no padding): mean of the last hidden states, cosine."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    model, tok = AutoModel.from_pretrained(str(folder)).eval(), AutoTokenizer.from_pretrained(str(folder))

    def embed(text: str) -> np.ndarray:
        with torch.no_grad():
            return model(**tok(text, return_tensors="pt")).last_hidden_state[0].mean(0).numpy()

    out = []
    for prompt, response in pairs:
        a, b = embed(prompt), embed(response)
        out.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    return out


def test_a_toy_scorer_kind_goes_through_rmspec_score(cli, encoder, tmp_path):
    from helpers.toy_scorer import KIND
    from rmspec.inference import scorers

    src = _rows(tmp_path)
    out = tmp_path / "scored.jsonl"
    scorers.register(KIND)
    try:
        assert scorers.of(scorers.load(encoder)) is KIND
        result = cli("score", encoder, src, "--out", out, "--json")
    finally:
        scorers.unregister("similarity")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["scored"] == 3 and summary["rejected"] == 1
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    rejects = [json.loads(line) for line in (tmp_path / "scored.rejects.jsonl").read_text().splitlines()]
    assert [r["id"] for r in scored] == [0, 1, 3] and [r["row"] for r in rejects] == [2]
    expected = _independent(encoder, [(r["prompt"], r["response"]) for r in scored])
    assert [r["similarity"] for r in scored] == pytest.approx(expected, abs=1e-5)
    assert len(set(round(e, 4) for e in expected)) == 3  # the rows differ, so equal scores mean something
    # Unregistered, the same folder is an ordinary model folder again: the toy claimed it, nothing else.
    assert scorers.of(scorers.load(encoder)).kind in ("reward", "pointwise")


def test_a_toy_scorer_kind_registered_by_one_line_outside_rmspec(encoder, tmp_path):
    """RMSPEC_SCORERS=helpers.toy_scorer in a fresh `rmspec score` process: the plugin route."""
    src = _rows(tmp_path)
    out = tmp_path / "plugin.jsonl"
    env = {
        **os.environ,
        "RMSPEC_SCORERS": "helpers.toy_scorer",
        "PYTHONPATH": str(REPO / "tests"),
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "rmspec", "score", str(encoder), str(src), "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    expected = _independent(encoder, [(r["prompt"], r["response"]) for r in scored])
    assert [r["similarity"] for r in scored] == pytest.approx(expected, abs=1e-5)
