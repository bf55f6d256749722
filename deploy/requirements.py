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
    wanted = project["dependencies"] + project["optional-dependencies"][extra]
    return [r for r in wanted if not r.startswith(project["name"] + "[")]  # self-references name other extras


def main(out_dir: str, *extras: str) -> None:
    for extra in extras:
        Path(out_dir, f"requirements-{extra}.txt").write_text("\n".join(requirements(extra)) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
