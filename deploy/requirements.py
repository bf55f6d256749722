"""Writes requirements-<extra>.txt (the core dependencies plus one extra's) from pyproject.toml.

The image builds install these third-party requirements in a layer of their own and the project's wheel in a
later one, so a change to the code rebuilds only that small last layer.
Usage: python deploy/requirements.py OUT_DIR EXTRA...
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(extra: str) -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    return project["dependencies"] + _extra(project, extra)


def _extra(project: dict, extra: str) -> list[str]:
    """The extra's own requirements, with self-references (`deliberate[llamacpp]`) replaced by what they name."""
    found: list[str] = []
    for requirement in project["optional-dependencies"][extra]:
        if requirement.startswith(project["name"] + "["):
            for other in requirement[len(project["name"]) + 1 : requirement.index("]")].split(","):
                found += [r for r in _extra(project, other.strip()) if r not in found]
        elif requirement not in found:
            found.append(requirement)
    return found


def main(out_dir: str, *extras: str) -> None:
    for extra in extras:
        Path(out_dir, f"requirements-{extra}.txt").write_text("\n".join(requirements(extra)) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
