"""Validates deploy/compose.yaml against the Compose Specification, offline.

`compose-spec` (bindings to the Rust `compose_spec` parser) rejects unknown keys and malformed values.
It neither interpolates nor merges YAML anchors (`<<: *x`), so `${NAME:-default}` is resolved first from
the environment or its default, as `docker compose` would, and PyYAML expands the anchors.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import yaml
from compose_spec import PyCompose

VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")


def interpolate(text: str) -> str:
    return VARIABLE.sub(lambda m: os.environ.get(m["name"]) or (m["default"] or ""), text)


def check(path: Path) -> list[str]:
    """The service names; raises ValueError naming the key and line of the first violation."""
    expanded = yaml.safe_dump(yaml.safe_load(interpolate(path.read_text())), sort_keys=False)
    return PyCompose.from_yaml(expanded).service_names()


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("compose.yaml"))
    try:
        services = check(path)
    except ValueError as error:
        print(f"{path}: {error}", file=sys.stderr)
        return 1
    print(f"{path}: valid, services: {', '.join(sorted(services))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
