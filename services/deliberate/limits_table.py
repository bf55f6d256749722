"""Writes the request limits declared in each service's limits.py into the protos' field comments
(`// Limits: …`) and docs/limits.md's table: `python -m deliberate.limits_table --write` (`make limits`).
Without --write it prints the table; tests/repo/test_limits.py fails when protos or the page are out of date."""

from __future__ import annotations

import re
from pathlib import Path

from .core.config import with_block, write_generated_pages
from .core.limits import MessageLimits
from .drafter.limits import GENERATE_DRAFTS
from .refiner.limits import REFINE
from .scheduler.limits import SOLVE
from .verifier.limits import CHECK_CONSTRAINTS, VERIFY_DRAFTS, VERIFY_STREAM_START

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ROOT / "protos"
PAGE = ROOT / "docs" / "limits.md"
LIMITS = [
    ("scheduler", SOLVE),
    ("drafter", GENERATE_DRAFTS),
    ("verifier", VERIFY_DRAFTS),
    ("verifier", VERIFY_STREAM_START),
    ("verifier", CHECK_CONSTRAINTS),
    ("refiner", REFINE),
]
TABLE_START, TABLE_END = "<!-- limits-table: start (make limits) -->", "<!-- limits-table: end -->"
COMMENT = "// Limits: "


def markdown_table() -> str:
    rows = ["| service | request field | limit |", "|---|---|---|"]
    for service, limits in LIMITS:
        name = limits.message.DESCRIPTOR.name
        for path, rule in limits.fields.items():
            rows.append(f"| {service} | `{name}.{path}` | {rule.describe(limits.settings_model)} |")
    return "\n".join(rows)


def field_comments(limits: MessageLimits) -> dict[str, str]:
    """One comment per top-level field: its own rule first, then those of what it holds (`each .text …`)."""
    parts: dict[str, list[str]] = {}
    for path, rule in limits.fields.items():
        field, _, rest = path.partition(".")
        top = field.removesuffix("[]")
        inner = ("each" + (f" .{rest}" if rest else "")) if field.endswith("[]") else rest
        parts.setdefault(top, []).append(f"{inner} {rule.describe(limits.settings_model)}".strip())
    return {field: "; ".join(described) + "." for field, described in parts.items()}


def with_comments(proto: str, message: str, comments: dict[str, str]) -> str:
    """`proto` with a `// Limits: …` line right above each named field of `message` (replacing an older one)."""
    lines = proto.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"message {message} \{{", line))
    out, depth = lines[:start], 0
    for end, line in enumerate(lines[start:], start=start):
        field = re.match(r"\s*(?:optional |repeated )?[\w.]+ (\w+) = \d+", line)
        if depth == 1 and field and field.group(1) in comments:
            while out[-1].strip().startswith(COMMENT):
                out.pop()
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}{COMMENT}{comments[field.group(1)]}")
        out.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0:
            return "\n".join(out + lines[end + 1 :]) + "\n"
    raise ValueError(f"message {message} is not closed")


def written() -> dict[Path, str]:
    """Every file the declarations write, with the content it should have."""
    files: dict[Path, str] = {}
    for _, limits in LIMITS:
        descriptor = limits.message.DESCRIPTOR
        path = PROTOS / descriptor.file.name
        files[path] = with_comments(files.get(path) or path.read_text(), descriptor.name, field_comments(limits))
    files[PAGE] = with_block(PAGE.read_text(), TABLE_START, TABLE_END, markdown_table())
    return files


def main() -> None:
    write_generated_pages(
        "python -m deliberate.limits_table",
        __doc__,
        "rewrite the protos' comments and docs/limits.md's table",
        markdown_table,
        written,
        ROOT,
    )


if __name__ == "__main__":
    main()
