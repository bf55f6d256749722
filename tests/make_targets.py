"""The make targets and what each does, read from the `##` lines above them in the Makefile and bench/bench.mk: `make
help` prints them, `make make-targets` writes them into docs/development.md's table (`--write`), and
tests/repo/test_make_targets.py fails when the page is out of date. Standard library only: `make help` works before
`make install`."""

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


def targets(makefiles: tuple[Path, ...] = MAKEFILES) -> dict[str, str]:
    """target → its description: the `##` lines right above its rule (variable and `#` lines may come between)."""
    found: dict[str, str] = {}
    for makefile in makefiles:
        described: list[str] = []
        for line in makefile.read_text().splitlines():
            if line.startswith("## "):
                described.append(line[3:].strip())
            elif (rule := RULE.match(line)) and described:
                for target in rule.group(1).split():
                    found.setdefault(target, " ".join(described))
                described = []
            elif not line.strip() or line.startswith(("\t", "include ")):
                described = []
    return found


def help_text() -> str:
    described = targets()
    width = max(map(len, described))
    return "\n".join(f"  make {name:<{width}}  {text}" for name, text in described.items())


def table() -> str:
    rows = ["| target | what |", "|---|---|"]
    for name, text in targets().items():
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
