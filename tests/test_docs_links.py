"""The README is an entrance and the docs hold together: the README stays short and links every page
under docs/; no relative link in README.md or docs/*.md is dead (the file, and the #anchor where
the target is a Markdown page); every measured figure names the results file it comes from.

A "measured figure", narrowly: a number that only a measurement can give, written in one of these
forms: a speed ratio (`1.56x`, `2.2x`), a percentage with a decimal (`93.0%`), a rate per second
(`49.9 req/s`, `16.25 pairs/s`), a wall time (`182 s`, `0.5-0.7 s`, `69 ms`), seconds per step
(`s/step`), a mean with its standard error (`0.764 ± 0.010`) or a peak memory (`peak RSS`).
Limits, defaults, test bounds and arithmetic (`256 MiB`, a `180 s timeout`, `under 1 s`,
`limit + 1 s`, `mean ± standard error` as a column's description, `100 x the rate`) are not figures. The unit that must name its source is the
paragraph, list item or table row holding the figure; the source is a path under bench/results/
(linked or in backticks), and it must exist.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FIGURE = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?x(?![\w])"  # a ratio: 1.56x
    r"|\d+\.\d+%"  # 93.0%
    r"|\d[\d,.]*\s(?:pairs|rows|req|texts|tokens|samples)/s\b"  # a rate
    # a wall time (182 s, 69 ms), not a bound or a tolerance (under 1 s, within 5 s, limit + 1 s, at most 30 s)
    r"|(?<![\w.])(?<!under )(?<!within )(?<!\+ )(?<!most )\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? (?:s|ms|min)\b(?! timeout)"
    r"|\d ?± ?\d|s/step|peak RSS"  # a mean and its standard error: 0.764 ± 0.010
)
SOURCE = re.compile(r"bench/results/[\w.-]+\.(?:md|jsonl)")
LIST = re.compile(r"\d+\. ")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (code is examples, not claims or links)."""
    out, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        out.append("" if fence else line)
    return out


def blocks(text: str) -> list[list[str]]:
    """Runs of prose lines between blank lines; a heading, and the first row of a table, start a new one."""
    found: list[list[str]] = [[]]
    for line in prose_lines(text):
        table_starts = line.startswith("|") and found[-1] and not found[-1][-1].startswith("|")
        if not line.strip() or line.startswith("#") or table_starts:
            found.append([])
        if line.strip() and not line.startswith("#"):
            found[-1].append(line)
    return [b for b in found if b]


def units(text: str) -> list[str]:
    """Paragraphs, list items (with their indented continuation) and table rows. A table row is read
    with its table's header and caption (the paragraph right above the table), so a table whose
    caption names the results file of all its rows passes; a row of a captionless table names its own."""
    found: list[str] = []
    previous: list[str] = []
    for block in blocks(text):
        if block[0].startswith("|"):
            paragraph = previous and not previous[0].startswith(("|", "- ", "* ")) and not LIST.match(previous[0])
            caption = " ".join(previous) if paragraph else ""
            found += [f"{caption} {block[0]} {row}".strip() for row in block]
        else:
            items: list[list[str]] = []
            for line in block:
                if not items or line.startswith(("- ", "* ")) or LIST.match(line):
                    items.append([])
                items[-1].append(line)
            found += [" ".join(item) for item in items]
        previous = block
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose_lines(page.read_text(encoding="utf-8")):
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    text = "\n".join(prose_lines(page.read_text(encoding="utf-8")))
    text = re.sub(r"`[^`\n]*`", "code", text)  # a link written inside inline code is not a link
    return LINK.findall(text)


def test_readme_is_an_entrance():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move the topic to a page under docs/"


def test_readme_links_every_page():
    linked = {
        (README.parent / target.split("#")[0]).resolve() for target in links(README) if not re.match(r"[a-z]+:", target)
    }
    missing = [p.name for p in PAGES if p.resolve() not in linked]
    assert PAGES and not missing, f"pages under docs/ the README does not link: {missing}"


def test_no_dead_relative_links():
    dead = []
    for page in [README, *PAGES]:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page.resolve()
            where = f"{page.relative_to(REPO)}: {target}"
            if not resolved.is_relative_to(REPO) or not resolved.exists():
                dead.append(f"{where} (no such file in the repository)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                dead.append(f"{where} (no heading with that anchor)")
    assert not dead, "\n".join(dead)


def test_every_measured_figure_names_its_results_file():
    unsourced, missing = [], []
    for page in [README, *PAGES]:
        for unit in units(page.read_text(encoding="utf-8")):
            figures = FIGURE.findall(unit)
            if not figures:
                continue
            sources = SOURCE.findall(unit)
            if not sources:
                unsourced.append(f"{page.relative_to(REPO)}: {figures[0]!r} in: {unit[:160]}")
            missing += [f"{page.relative_to(REPO)}: {s}" for s in sources if not (REPO / s).exists()]
    assert not unsourced, "figures without a bench/results/ file:\n" + "\n".join(unsourced)
    assert not missing, "results files named that do not exist:\n" + "\n".join(missing)


def test_the_checks_catch_what_they_claim(tmp_path):
    """The helpers above on known input: a dead anchor, a figure without a source, a heading's slug."""
    page = tmp_path / "p.md"
    page.write_text("# Two stages (`model.init_from`)\n\nIt ran 1.56x faster.\n\n```\n[x](gone.md)\n```\n")
    assert anchors(page) == {"two-stages-modelinit_from"}
    assert links(page) == []  # inside a code fence
    assert [u for u in units(page.read_text()) if FIGURE.search(u)] == ["It ran 1.56x faster."]
    assert not FIGURE.search("at most 256 MiB; OpenRLHF's 180 s timeout; 100 x the model's rate")
    assert not FIGURE.search("counted within the limit + 1 s, answered in under 1 s; mean ± standard error")
    assert FIGURE.search("0.764 ± 0.010") and FIGURE.search("49.9 req/s") and FIGURE.search("93.0%")
    assert FIGURE.search("answered in 0.5-0.7 s") and FIGURE.search("trains in 291 s")
    # a table row is read with its caption: sourced through the caption, else on its own
    table = "| run | speed |\n|---|---|\n| packed | 2.42x |\n"
    assert not any(SOURCE.search(u) for u in units(table) if FIGURE.search(u))
    captioned = units("From bench/results/x.md:\n\n" + table)
    assert all(SOURCE.search(u) for u in captioned if FIGURE.search(u)) and len(captioned) == 4
