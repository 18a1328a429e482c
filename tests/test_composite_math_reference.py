"""math_answer reads a MATH-style reference (bare LaTeX, verl's `ground_truth`) as LaTeX, the way
verl wraps it (`\\boxed{REF}`), never with math-verify's plain-expression reading, which cuts many
bare LaTeX answers short (`3\\sqrt{2}` read as 3, `\\{-2, 2\\}` as 2: issue 41 defect 0).

Independent computation: math-verify called directly, the reference wrapped as verl wraps it and
as `$REF$`; the hand-written expectation must agree with both. Answers are right and wrong on
references of every kind: fractions, roots, sets, intervals, units, tuples, matrices, text."""

from __future__ import annotations

import pytest

from helpers.ci import need
from rmspec.composite.components import build
from rmspec.composite.components.context import Context
from rmspec.composite.mathpool import check_inline, gold_text
from rmspec.composite.outcome import Item
from rmspec.spec.composite_rules import MathAnswer

math_verify = need("math_verify")

# (bare LaTeX reference, response, right?)
ROWS = [
    ("3\\sqrt{2}", "So $\\boxed{3\\sqrt{2}}$.", True),
    ("3\\sqrt{2}", "So $\\boxed{\\sqrt{18}}$.", True),
    ("3\\sqrt{2}", "So $\\boxed{3}$.", False),  # today: the reference read as 3, so this scored 1
    ("3\\sqrt{2}", "So $\\boxed{3\\sqrt{3}}$.", False),
    ("\\{-2, 2\\}", "The roots are $\\boxed{\\{2, -2\\}}$.", True),
    ("\\{-2, 2\\}", "The roots are $\\boxed{2}$.", False),
    ("\\{1, 3\\}", "$\\boxed{\\{3, 1\\}}$", True),
    ("\\frac{1}{2}", "$\\boxed{0.5}$", True),
    ("\\dfrac{3}{4}", "$\\boxed{\\frac{6}{8}}$", True),
    ("-\\frac{7}{3}", "$\\boxed{-\\frac{7}{3}}$", True),
    ("-\\frac{7}{3}", "$\\boxed{\\frac{7}{3}}$", False),
    ("\\frac{\\sqrt{3}}{2}", "$\\boxed{\\frac{\\sqrt{3}}{2}}$", True),
    ("2\\pi", "$\\boxed{2\\pi}$", True),
    ("2\\pi", "$\\boxed{2}$", False),
    ("4\\sqrt{3}", "$\\boxed{\\sqrt{48}}$", True),
    ("2\\sqrt{5}", "$\\boxed{2\\sqrt{5}}$", True),
    ("(1, 3]", "$\\boxed{(1, 3]}$", True),
    ("(1, 3]", "$\\boxed{3}$", False),
    ("(-\\infty, 2)", "$\\boxed{(-\\infty, 2)}$", True),
    ("[0, \\infty)", "$\\boxed{[0, \\infty)}$", True),
    ("5\\text{ cm}", "$\\boxed{5 \\text{ cm}}$", True),
    ("6 \\text{ inches}", "$\\boxed{6}$", True),
    ("90^\\circ", "$\\boxed{90}$", True),
    ("10\\%", "$\\boxed{10}$", True),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "$\\boxed{(3, \\frac{\\pi}{2})}$", True),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "$\\boxed{3}$", False),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "$\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}$", True),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "$\\boxed{2}$", False),
    ("12", "12 apples, so $\\boxed{12}$", True),
    ("0.5", "$\\boxed{\\frac{1}{2}}$", True),
    ("-3", "$\\boxed{3}$", False),
    ("x^2+1", "$\\boxed{1 + x^2}$", True),
    ("\\text{(C)}", "$\\boxed{\\text{(C)}}$", True),
    # already delimited references are read as written
    ("$\\frac{1}{2}$", "$\\boxed{0.5}$", True),
    ("\\boxed{3\\sqrt{2}}", "$\\boxed{\\sqrt{18}}$", True),
]


def direct(reference: str, response: str, wrap: str) -> bool:
    """math-verify called directly, the reference given as LaTeX (verl: \\boxed{REF}; or $REF$)."""
    from math_verify import LatexExtractionConfig, parse, verify

    gold = wrap.format(reference) if "$" not in reference and "\\boxed" not in reference else reference
    return bool(verify(parse(gold, [LatexExtractionConfig()]), parse(response)))


@pytest.mark.parametrize("reference,response,right", ROWS)
def test_inline_check_agrees_with_math_verify_called_directly(reference, response, right):
    expected = 1.0 if right else 0.0
    assert direct(reference, response, "\\boxed{{{}}}") is right
    assert direct(reference, response, "${}$") is right
    outcome = check_inline(reference, response)
    assert not outcome.failed, outcome
    assert outcome.value == expected, (reference, response, outcome)


def test_the_component_in_its_pool_gives_the_same_values():
    """Through the real path: a math_answer component scoring rows in the math-verify pool."""
    context = Context(math_workers=2)
    try:
        rule = build(MathAnswer(name="math", kind="math_answer"), context)
        outcomes = rule.score([Item(prompt="q", response=resp, reference=ref) for ref, resp, _ in ROWS])
    finally:
        context.close()
    assert [o.value for o in outcomes] == [1.0 if right else 0.0 for _, _, right in ROWS]


def test_the_reference_rule():
    assert gold_text("3\\sqrt{2}") == "\\boxed{3\\sqrt{2}}"
    assert gold_text(" 12 ") == "\\boxed{12}"
    assert gold_text("\\$18.90") == "\\boxed{\\$18.90}"  # an escaped dollar is a currency sign, not a delimiter
    for delimited in ("$x$", "\\(x\\)", "\\[x\\]", "\\boxed{x}"):
        assert gold_text(delimited) == delimited


def test_the_templates_format_and_math_answer_read_the_same_answer():
    """templates/composite.yaml (issue 42 item 15): a response that passes the format rule is graded
    by math_answer on its <answer>, never on a number in its <think> (math_answer reads the last
    \\boxed{}, else the last number, of the whole response)."""
    import re
    from pathlib import Path

    import yaml

    template = Path(__file__).resolve().parents[1] / "templates" / "composite.yaml"
    components = {c["name"]: c for c in yaml.safe_load(template.read_text())["approach"]["components"]}
    fmt = re.compile(components["format"]["pattern"], re.DOTALL)
    cases = [  # (response, the answer inside <answer>, a number only in <think>)
        ("<think>it might be 3</think>\n<answer>$\\boxed{5}$</answer>", "5", "3"),
        ("<think>try 7, no</think><answer>The total is $\\boxed{\\frac{1}{2}}$.</answer>", "\\frac{1}{2}", "7"),
        ("<think>\\boxed{9} was wrong</think><answer>so $\\boxed{4}$</answer>", "4", "9"),
    ]
    for response, inside, thought in cases:
        assert fmt.fullmatch(response), response
        assert check_inline(inside, response).value == 1.0, response
        assert check_inline(thought, response).value == 0.0, response
    # formatted by the tags alone but with no boxed answer: the think's number would be graded, so
    # the format refuses it (the gate's floor applies, whatever math_answer reads)
    for response in ("<think>it is 5</think><answer>no idea</answer>", "<think>x</think><answer>5</answer>"):
        assert not fmt.fullmatch(response), response
