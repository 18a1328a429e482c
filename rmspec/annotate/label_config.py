"""The labelling interfaces, as Label Studio XML (accepted by `POST /api/projects`, 1.23.2).

Pairwise: the prompt, response A and B, a `<Pairwise>` choice (`left` = A, `right` = B) and an
explicit tie choice; a task with no choice and no tie is left unlabelled (the importer rejects an
annotation with neither). Pointwise: one star `<Rating>` per attribute of the spec, its stars
mapped onto the spec's integer scale (1 star = scale.min). Process: the prompt, the numbered steps
(`<Paragraphs>`) and the first wrong step as a `<Number>` (0: every step is correct), ProcessBench's
labelling: steps before it are correct, it is wrong, later ones are not judged.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from rmspec.errors import DataError

# Control names the importer reads back; a result under any other from_name is rejected.
PAIRWISE_NAME = "pw"
TIE_NAME = "tie"
TIE_CHOICE = "tie"
PAIRWISE_CHOICES = {"left": "a", "right": "b"}  # Pairwise.selected -> the response it names


def pairwise_config() -> str:
    return (
        "<View>\n"
        '  <Header value="Prompt"/>\n  <Text name="prompt" value="$prompt"/>\n'
        '  <Header value="Response A"/>\n  <Text name="a" value="$response_a"/>\n'
        '  <Header value="Response B"/>\n  <Text name="b" value="$response_b"/>\n'
        '  <Header value="Which response is better? (choose A or B, or mark a tie)"/>\n'
        f'  <Pairwise name="{PAIRWISE_NAME}" toName="a,b"/>\n'
        f'  <Choices name="{TIE_NAME}" toName="prompt" choice="single" showInline="true">\n'
        f'    <Choice value="{TIE_CHOICE}"/>\n  </Choices>\n'
        "</View>\n"
    )


FIRST_ERROR_NAME = "first_error"


def process_config() -> str:
    return (
        "<View>\n"
        '  <Header value="Problem"/>\n  <Text name="prompt" value="$prompt"/>\n'
        '  <Header value="Solution, step by step"/>\n'
        '  <Paragraphs name="steps" value="$steps" layout="dialogue" nameKey="step" textKey="text"/>\n'
        '  <Header value="First wrong step (1 = the first step; 0 = every step is correct)"/>\n'
        f'  <Number name="{FIRST_ERROR_NAME}" toName="steps" min="0" required="true"/>\n'
        "</View>\n"
    )


def rating_stars(scale: tuple[float, float]) -> int:
    low, high = scale
    if low != int(low) or high != int(high):
        raise DataError(
            f"approach.scale {low}..{high} is not an integer scale: Label Studio ratings are whole stars",
            "use an integer scale (e.g. min: 0, max: 4) for a spec you label in Label Studio",
        )
    return int(high - low) + 1


def pointwise_config(attributes: list[str], scale: tuple[float, float]) -> str:
    stars = rating_stars(scale)
    low, high = (int(v) for v in scale)
    lines = [
        "<View>",
        '  <Header value="Prompt"/>',
        '  <Text name="prompt" value="$prompt"/>',
        '  <Header value="Response"/>',
        '  <Text name="response" value="$response"/>',
    ]
    for attr in attributes:
        header = f"{attr}: 1 star = {low}, {stars} stars = {high}"
        lines.append(f"  <Header value={quoteattr(header)}/>")
        lines.append(f'  <Rating name={quoteattr(attr)} toName="response" maxRating="{stars}"/>')
    lines.append("</View>")
    return "\n".join(lines) + "\n"


def render_prompt(prompt: str | list[dict[str, str]]) -> str:
    """What the annotator reads: the text, or a conversation as `role: content` blocks."""
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in prompt)
