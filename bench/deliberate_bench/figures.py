"""Figures in the README and docs/ written as references to the results file they come from, so that a figure cannot
drift from its file: a Markdown link to a committed JSON result whose title names the value,

    right on [68.5 %](../bench/studies/gsm8k-headline/eval-gsm8k.json "configs[name=pipeline@5].accuracy") of them

renders as the figure linked to its file, and `deliberate bench figures` (tests/repo/test_doc_figures.py) resolves
every such link and checks the figure against the value: the link's first number, read as a percentage of a fraction
when it ends in `%` and the value is within [-1, 1], equal to the value to the digits it shows. A table copied whole
from a Markdown result sits between `<!-- copied from ../bench/studies/<s>/<name>.md -->` and `<!-- end of copy -->`,
and must be a run of that file's lines.

`deliberate bench figures --write` rewrites each figure that drifted from its file to the file's value, in the
same digits and unit, and prints each change: the figures follow a rerun, the prose around them is reread by hand.

A measured figure anywhere else — a decimal number with a unit, `68.5 %`, `6.17 s`, `1.59×`, outside a reference, a
copy, code and inline code — fails the check, unless its paragraph says why no committed file holds it, with
`<!-- figures not kept: why -->` (a report of a run that was not committed, a figure of another machine).

The path: keys joined by dots; `key[field=value]` picks the element of a list whose `field` is `value` (and
`key[a=1,b=2]` the one where both hold), `key[3]` the fourth (brackets may hold dots).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from deliberate_bench.command import parser_for
from deliberate_bench.results import ROOT

# [text](path/to/file.json "path.in[name=x].file")
REFERENCE = re.compile(r"\[(?P<text>[^\]]+)\]\((?P<file>[^)\s]+\.json) \"(?P<path>[^\"]+)\"\)")
# A table copied whole from a results file: <!-- copied from ../bench/studies/s/x.md --> … <!-- end of copy -->
COPY_START = re.compile(r"<!-- copied from (?P<file>\S+\.md) -->")
COPY_END = "<!-- end of copy -->"
# A figure as a measurement is written: a decimal number and its unit.
MEASURED = re.compile(r"(?<![\w.\[/-])\d+\.\d+ ?(?:%|×|x\b|(?:s|ms|min|points?|GiB|MiB|MB)\b)")
NOT_KEPT = "<!-- figures not kept:"
# Where a measured figure may sit: a fenced block (fences at the start of a line), inline code (on one line or two),
# a copied block, a reference.
EXEMPT = re.compile(
    r"^[ \t]*```.*?^[ \t]*```|`[^`\n]*(?:\n[^`\n]*)?`|<!-- copied from .*?<!-- end of copy -->|"
    r"\[[^\]]+\]\([^)\s]+\.json \"[^\"]+\"\)",
    re.S | re.M,
)
NUMBER = re.compile(r"[-−+]?\d[\d,]*(?:\.\d+)?")
SEGMENT = re.compile(r"(?P<key>[^.\[\]]+)?(?:\[(?P<pick>[^\]]+)\])?")


@dataclass(frozen=True)
class Copy:
    """Lines a page copies from a committed Markdown result, between COPY_START and COPY_END."""

    page: Path
    line: int
    file: Path
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Reference:
    page: Path
    line: int
    text: str
    file: Path
    path: str


def references(page: Path) -> list[Reference]:
    """Every figure reference on a Markdown page, its file resolved against the page's folder."""
    found = []
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        for match in REFERENCE.finditer(line):
            file = (page.parent / match["file"]).resolve()
            found.append(Reference(page, number, match["text"], file, match["path"]))
    return found


def copies(page: Path) -> list[Copy]:
    """Every block a page copies from a results file, its file resolved against the page's folder."""
    found, lines = [], page.read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        if start := COPY_START.search(line):
            end = next((i for i in range(number, len(lines)) if lines[i].strip() == COPY_END), len(lines))
            block = tuple(text for text in lines[number:end] if text.strip())
            found.append(Copy(page, number, (page.parent / start["file"]).resolve(), block))
    return found


def copy_mismatch(copy: Copy) -> str | None:
    """Why the block is not a run of its file's lines; None when it is."""
    if not copy.file.is_file():
        return f"no file {copy.file}"
    source = [line for line in copy.file.read_text().splitlines() if line.strip()]  # blank lines are layout
    if not copy.lines:
        return "an empty copy"
    starts = [i for i, line in enumerate(source) if line == copy.lines[0]]
    if any(source[i : i + len(copy.lines)] == list(copy.lines) for i in starts):
        return None
    differing = next((line for line in copy.lines if line not in source), copy.lines[0])
    return f"the line {differing[:80]!r} is not the file's (or not in its order)"


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


@cache
def loaded(file: Path) -> object:
    return json.loads(file.read_text())


def resolve(document: object, path: str) -> object:
    """The value at `path` in a JSON document; KeyError naming the segment that found nothing."""
    value = document
    for segment in split(path):
        match = SEGMENT.fullmatch(segment)
        if match is None:
            raise KeyError(f"{segment!r} is not a key or key[pick]")
        if match["key"]:
            if not isinstance(value, dict) or match["key"] not in value:
                raise KeyError(f"no key {match['key']!r}")
            value = value[match["key"]]
        if match["pick"]:
            value = picked(value, match["pick"])
    return value


def split(path: str) -> list[str]:
    """The path's segments: split on dots outside brackets."""
    segments, depth, current = [], 0, ""
    for char in path:
        depth += (char == "[") - (char == "]")
        if char == "." and depth == 0:
            segments.append(current)
            current = ""
        else:
            current += char
    return [*segments, current]


def picked(value: object, pick: str) -> object:
    if not isinstance(value, list):
        raise KeyError(f"[{pick}] on a value that is not a list")
    if pick.isdigit():
        return value[int(pick)]
    wanted = dict(condition.partition("=")[::2] for condition in pick.split(","))
    found = [item for item in value if isinstance(item, dict) and all(str(item.get(f)) == w for f, w in wanted.items())]
    if len(found) != 1:
        raise KeyError(f"[{pick}] matches {len(found)} elements")
    return found[0]


def mismatch(reference: Reference) -> str | None:
    """Why the figure does not show its value; None when it does."""
    if not reference.file.is_file():
        return f"no file {reference.file}"
    try:
        value = resolve(loaded(reference.file), reference.path)
    except (KeyError, IndexError) as error:
        return f"{reference.path}: {error}"
    shown = NUMBER.search(reference.text)
    if not isinstance(value, int | float) or isinstance(value, bool) or shown is None:
        return None if str(value) == reference.text.strip("` ") else f"shows {reference.text!r}, the file {value!r}"
    digits = shown[0].replace(",", "").replace("−", "-")
    expected = value * 100 if reference.text.rstrip().endswith("%") and -1 <= value <= 1 else value
    decimals = len(digits.partition(".")[2])
    if abs(float(digits) - expected) > 0.5 * 10**-decimals + 1e-9:
        return f"shows {reference.text!r}, the file {expected!r}"
    return None


def check(root: Path = ROOT) -> tuple[int, list[str]]:
    """How many references the pages hold, and one line per figure that does not show its value."""
    found = [reference for page in pages(root) for reference in references(page)]
    wrong = [
        f"{r.page.relative_to(root)}:{r.line}: [{r.text}] {r.file.name} {r.path}: {why}"
        for r in found
        if (why := mismatch(r)) is not None
    ]
    copied = [copy for page in pages(root) for copy in copies(page)]
    wrong += [
        f"{c.page.relative_to(root)}:{c.line}: copied from {c.file.name}: {why}"
        for c in copied
        if (why := copy_mismatch(c)) is not None
    ]
    return len(found) + sum(len(c.lines) for c in copied), wrong


def loose(page: Path) -> list[str]:
    """`page:line: figure` for each measured figure outside a reference, a copy or code, in a paragraph that does not
    say its figures are not kept."""
    text = page.read_text()
    blanked = EXEMPT.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), text)  # same lines, exempt text gone
    found = []
    for paragraph in re.finditer(r"(?:[^\n]+\n?)+", blanked):
        if NOT_KEPT in text[paragraph.start() : paragraph.end()]:
            continue
        for figure in MEASURED.finditer(paragraph[0]):
            line = text.count("\n", 0, paragraph.start() + figure.start()) + 1
            found.append(f"{page.relative_to(ROOT)}:{line}: {figure[0]}")
    return found


def shown_as(reference: Reference, value: float) -> str:
    """The reference's text with its figure replaced by `value`, in the same digits, sign and unit."""
    shown = NUMBER.search(reference.text)
    digits = shown[0].replace(",", "").replace("−", "-")
    scaled = value * 100 if reference.text.rstrip().endswith("%") and -1 <= value <= 1 else value
    decimals = len(digits.partition(".")[2])
    figure = f"{scaled:,.{decimals}f}" if "," in shown[0] else f"{scaled:.{decimals}f}"
    if shown[0][0] in "+-−" and scaled >= 0:
        figure = ("+" if shown[0][0] == "+" else "") + figure
    if shown[0][0] == "−":
        figure = figure.replace("-", "−")
    return reference.text[: shown.start()] + figure + reference.text[shown.end() :]


def rewritten(page: Path) -> list[str]:
    """Rewrites each numeric reference of the page that drifted from its file to the file's value (same digits and
    unit); returns what changed, `page:line: old → new`. The prose around a figure is the writer's to read again."""
    lines, changed = page.read_text().split("\n"), []
    for reference in references(page):
        if mismatch(reference) is None or not reference.file.is_file():
            continue
        try:
            value = resolve(loaded(reference.file), reference.path)
        except (KeyError, IndexError):
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or NUMBER.search(reference.text) is None:
            continue
        new = shown_as(reference, value)
        line = lines[reference.line - 1]
        for match in REFERENCE.finditer(line):
            if match["text"] == reference.text and match["path"] == reference.path:
                lines[reference.line - 1] = line[: match.start("text")] + new + line[match.end("text") :]
                changed.append(f"{page.relative_to(ROOT)}:{reference.line}: {reference.text} → {new}")
                break
    if changed:
        page.write_text("\n".join(lines))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("figures", __doc__)
    parser.add_argument("--write", action="store_true", help="rewrite drifted figures from their files, and say which")
    args = parser.parse_args(argv)
    if args.write:
        for line in (line for page in pages() for line in rewritten(page)):
            print(line)
    count, wrong = check()
    unreferenced = [line for page in pages() for line in loose(page)]
    for line in wrong + unreferenced:
        print(line, file=sys.stderr)
    print(f"{count} figures (references and copied lines) on {len(pages())} pages, {len(wrong)} not their file's, "
          f"{len(unreferenced)} measured figures referencing no file")  # fmt: skip
    return 1 if wrong or unreferenced else 0
