"""The lab keeps the servers' shape: every program a module of `deliberate_bench` in a room by kind, run by name
(`deliberate bench <name>`), no import cycles, no file over the line limit, no `sys.path` edits (development.md)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from deliberate_bench.command import BENCHMARKS
from tests.import_graph import assert_acyclic, imported_names, module_names

BENCH = Path(__file__).resolve().parents[2] / "bench"
PACKAGE = BENCH / "deliberate_bench"
MAX_LINES = 450
ROOMS = {"speed", "replays", "live", "eval"}


MODULES = module_names(PACKAGE)


def imports(path: Path) -> set[str]:
    """The package's modules a module imports anywhere in it (inside functions too: a cycle is one either way)."""
    assert not re.search(r"^\s*from \.", path.read_text(), re.MULTILINE), f"{path.name}: a relative import"
    return imported_names(path, "") & set(MODULES)


IMPORTS = {name: imports(path) - {name} for name, path in MODULES.items()}


def test_no_import_cycles():
    assert_acyclic(IMPORTS)


def test_the_cycle_check_sees_an_import():
    assert "deliberate_bench.eval.replay" in IMPORTS["deliberate_bench.replays.stopping"]


def test_no_file_over_the_line_limit():
    long = {str(path.relative_to(BENCH)): n for path in BENCH.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > MAX_LINES}  # fmt: skip
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_no_path_edits_and_no_late_imports():
    patched = [str(path.relative_to(BENCH)) for path in BENCH.rglob("*.py")
               if re.search(r"sys\.path\.(insert|append)|noqa: E402", path.read_text())]  # fmt: skip
    assert not patched, f"sys.path edits or imports after code: {patched}"


def test_every_program_is_a_module_of_the_package_in_a_room():
    loose = sorted(path.name for path in BENCH.glob("*.py"))
    assert not loose, f"scripts beside the package: {loose}; move them into a room of deliberate_bench/"
    rooms = {name.split(".")[1] for name in MODULES if name.count(".") >= 2}
    assert rooms == ROOMS, f"rooms {sorted(rooms)}; a new room goes into ROOMS and docs/development.md"


def test_every_registered_benchmark_runs_by_name():
    for name, (module, _) in BENCHMARKS.items():
        assert module in MODULES, f"{name}: no module {module}"
        assert callable(importlib.import_module(module).main), f"{name}: {module} has no main(argv)"
