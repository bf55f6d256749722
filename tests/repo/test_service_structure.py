"""The servers' package keeps its shape: rooms on floors (a room imports only rooms on lower floors or its own), no
import cycles between modules, and no file a reader cannot hold in mind (docs/development.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tests.import_graph import assert_acyclic, imported_names, module_names, package_of

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "deliberate"
MAX_LINES = 450

# Floor of each room, lowest first. `core` is plumbing, `selection` and `decisions` pure domain code; the services
# sit above the engines and the risk model; the rule packs plug in; the commands and generated tables on top.
FLOORS = {
    "core": 0,
    "selection": 1,
    "decisions": 1,
    "engines": 2,
    "risk": 2,
    "drafter": 3,
    "refiner": 3,
    "verifier": 3,
    "scheduler": 3,
    "gateway": 3,
    "rule_packs": 4,
    "cli": 5,
    "limits_table": 5,
    "settings_table": 5,
}


MODULES = module_names(PACKAGE)


def imported_at_load(name: str, path: Path) -> Iterator[str]:
    """The package's modules that `name` imports when it is loaded (not those imported inside functions or only
    for type checking)."""
    found = imported_names(path, package_of(name, path), at_load_only=True)
    yield from (target for target in found if target in MODULES and target != name)


IMPORTS = {name: set(imported_at_load(name, path)) for name, path in MODULES.items()}


def room(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_every_room_has_a_floor():
    rooms = {room(module) for module in MODULES} - {""}
    assert rooms <= set(FLOORS), f"rooms without a floor in FLOORS: {sorted(rooms - set(FLOORS))}"


def test_no_room_imports_a_room_on_a_higher_floor():
    back = sorted(
        f"{module} → {target}"
        for module, targets in IMPORTS.items()
        for target in targets
        if room(module) and room(target) and FLOORS[room(target)] > FLOORS[room(module)]
    )
    assert not back, f"imports against the floors: {back}"


def test_no_import_cycles():
    assert_acyclic(IMPORTS)


def test_no_file_over_the_line_limit():
    long = {str(path.relative_to(PACKAGE)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > MAX_LINES}  # fmt: skip
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_the_checks_see_an_import():
    assert "deliberate.selection.numbers" in IMPORTS["deliberate.selection.consensus"]


def test_every_service_starts_without_the_client_package():
    """The images install the server and the contract only (deploy/Containerfile): no service module may need
    deliberate-client, which only the `deliberate` command (cli/) plugs into."""
    import subprocess
    import sys

    services = ("scheduler", "drafter", "verifier", "refiner", "gateway", "risk")
    code = "import sys; sys.modules['deliberate_client'] = None\n" + "".join(
        f"import deliberate.{service}.__main__\n" for service in services
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


SERVICES = ("drafter", "refiner", "verifier", "scheduler", "gateway")


def test_no_service_imports_another():
    """Each service is its own process and image: what two of them share lives below them (`decisions` for the
    decision feature, issue 55), never in one of them — not even an import inside a function."""
    crossing = sorted(
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if room(name) in SERVICES
        for target in imported_names(path, package_of(name, path))
        if target.startswith("deliberate.") and room(target) in SERVICES and room(target) != room(name)
    )
    assert not crossing, "\n".join(crossing)
