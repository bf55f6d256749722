"""The make targets and what each does, read from the `##` lines above them in the Makefile and bench/bench.mk, in the
sections their `##@` lines open: `make help` prints them section by section, the README's two set-up commands first,
`make make-targets` writes them into docs/development.md's table (`--write`), and tests/repo/test_make_targets.py fails
when the page is out of date. Standard library only: `make help` works before `make install`."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAKEFILES = (ROOT / "Makefile", ROOT / "bench" / "bench.mk")
PAGE = ROOT / "docs" / "development.md"
TABLE_START, TABLE_END = "<!-- make-targets: start (make make-targets) -->", "<!-- make-targets: end -->"
RULE = re.compile(r"^([a-z][\w.-]*(?: [a-z][\w.-]*)*):(?![=:])")
DOC_LINK = re.compile(r"\(?docs/([\w-]+\.md(?:#[\w-]+)?)\)?")
SECTION = "##@ "
# The README's two set-up commands, which `make help` shows before every section.
SET_UP = ("run", "test")


def targets(makefiles: tuple[Path, ...] = MAKEFILES) -> dict[str, str]:
    """target → its description: the `##` lines right above its rule (variable and `#` lines may come between)."""
    return {name: text for section in sections(makefiles).values() for name, text in section.items()}


def sections(makefiles: tuple[Path, ...] = MAKEFILES) -> dict[str, dict[str, str]]:
    """section → its described targets, in the order the makefiles give them (a target before any `##@` line is in
    the section "other")."""
    found: dict[str, dict[str, str]] = {}
    seen: set[str] = set()
    for makefile in makefiles:
        section, described = "other", []
        for line in makefile.read_text().splitlines():
            if line.startswith(SECTION):
                section, described = line[len(SECTION) :].strip(), []
            elif line.startswith("## "):
                described.append(line[3:].strip())
            elif (rule := RULE.match(line)) and described:
                for target in rule.group(1).split():
                    if target not in seen:
                        seen.add(target)
                        found.setdefault(section, {})[target] = " ".join(described)
                described = []
            elif not line.strip() or line.startswith(("\t", "include ")):
                described = []
    return found


def grouped() -> dict[str, dict[str, str]]:
    """The sections as `make help` shows them: the two set-up commands first, then every section in order."""
    by_section = sections()
    described = targets()
    first = {"set up (the README's two commands)": {name: described[name] for name in SET_UP}}
    rest = {title: {n: t for n, t in found.items() if n not in SET_UP} for title, found in by_section.items()}
    return first | {title: found for title, found in rest.items() if found}


def help_text() -> str:
    width = max(map(len, targets()))
    lines = []
    for title, found in grouped().items():
        lines += [f"{title}:"] + [f"  make {name:<{width}}  {text}" for name, text in found.items()] + [""]
    return "\n".join(lines).rstrip()


def table() -> str:
    rows = ["| target | what |", "|---|---|"]
    for title, found in grouped().items():
        rows.append(f"| **{title}** | |")
        for name, text in found.items():
            linked = DOC_LINK.sub(lambda m: f"([{m.group(1)}]({m.group(1)}))", text.replace("|", "\\|"))
            rows.append(f"| `make {name}` | {linked} |")
    return "\n".join(rows)


def written() -> str:
    page = PAGE.read_text()
    before, start, rest = page.partition(TABLE_START + "\n")
    _, end, after = rest.partition(TABLE_END)
    if not (start and end):
        raise ValueError(f"{PAGE.name} has no {TABLE_START!r} … {TABLE_END!r} block")
    return f"{before}{TABLE_START}\n{table()}\n{TABLE_END}{after}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.make_targets", description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the table in docs/development.md")
    if not parser.parse_args(argv).write:
        print(help_text())
        return 0
    if PAGE.read_text() != (content := written()):
        PAGE.write_text(content)
        print(f"wrote {PAGE.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
