"""Writes requirements-<extra>.txt (the core dependencies plus one extra's) from pyproject.toml.

The image builds install these third-party requirements in a layer of their own and the project's wheels (the
server, deliberate-api, deliberate-client) in a later one, so a change to the code rebuilds only that small last
layer. The project's own distributions are therefore replaced by their third-party dependencies.
Usage: python deploy/requirements.py OUT_DIR EXTRA...
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
FIRST_PARTY = {
    "deliberate-api": ROOT / "protos/python/pyproject.toml",
    "deliberate-client": ROOT / "clients/python/pyproject.toml",
}


def requirements(extra: str) -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    core = _third_party(project["dependencies"])
    return core + [r for r in _extra(project, extra) if r not in core]


def _third_party(requirements: list[str]) -> list[str]:
    """`requirements` with each first-party distribution (`deliberate-api==0.1.0`) replaced by its dependencies."""
    found: list[str] = []
    for requirement in requirements:
        name = re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0]
        expanded = (
            _third_party(tomllib.loads(FIRST_PARTY[name].read_text())["project"]["dependencies"])
            if name in FIRST_PARTY
            else [requirement]
        )
        found += [r for r in expanded if r not in found]
    return found


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
