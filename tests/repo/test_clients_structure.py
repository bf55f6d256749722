"""The clients keep the shape of the servers' package and the lab (tests/repo/test_service_structure.py): no source file
a reader cannot hold in mind, no import cycle in the Python client, and a client that stands alone (it imports
neither the servers nor the lab; they plug into its command through entry points)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.import_graph import assert_acyclic, imported_names, module_names, package_of

from .test_service_structure import MAX_LINES

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients"
SOURCE_SUFFIXES = (".py", ".go", ".ts", ".js", ".sh")
PYTHON_CLIENT = CLIENTS / "python" / "deliberate_client"


def tracked_sources() -> list[Path]:
    """The clients' hand-written sources in git: generated contract code (`gen/`) is the contract's, not theirs."""
    listed = subprocess.run(["git", "ls-files", "clients"], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = [ROOT / line for line in listed.stdout.splitlines()]
    return [p for p in paths if p.suffix in SOURCE_SUFFIXES and "gen" not in p.relative_to(CLIENTS).parts]


def python_imports() -> dict[str, set[str]]:
    """The Python client's modules → the client modules and outside packages each imports at load."""
    modules = module_names(PYTHON_CLIENT)
    return {name: imported_names(path, package_of(name, path), at_load_only=True) for name, path in modules.items()}


def test_the_checks_see_the_clients_files():
    sources = {str(p.relative_to(CLIENTS)) for p in tracked_sources()}
    assert {"python/deliberate_client/cli.py", "go/deliberate/client.go", "typescript/src/index.ts"} <= sources


def test_no_client_file_over_the_line_limit():
    long = {str(path.relative_to(CLIENTS)): n for path in tracked_sources()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}  # fmt: skip
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_the_python_client_has_no_import_cycle_and_stands_alone():
    imports = python_imports()
    within = {name: {t for t in targets if t in imports and t != name} for name, targets in imports.items()}
    assert "deliberate_client.progress" in within["deliberate_client.cli"]  # the check sees an import
    assert_acyclic(within)
    outside = {t.split(".")[0] for targets in imports.values() for t in targets}
    assert not outside & {"deliberate", "deliberate_bench"}, "the client imports the servers or the lab"
