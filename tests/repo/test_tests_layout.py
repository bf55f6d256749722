"""tests/ mirrors the code: the code's tests in one folder per room of services/deliberate, repository checks in
tests/repo, and no test file name twice (a name says which file a failure is in)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS.parent / "services" / "deliberate"


def test_the_unit_tests_live_in_the_rooms_of_the_code_they_test() -> None:
    rooms = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    folders = {path.name for path in (TESTS / "unit").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert folders <= rooms, f"tests/unit/ folders that are no room of services/deliberate: {sorted(folders - rooms)}"
    loose = sorted(path.name for path in (TESTS / "unit").glob("test_*.py"))
    assert not loose, f"tests/unit/ holds tests outside a room: {loose}"
    missing_init = sorted(folder for folder in folders if not (TESTS / "unit" / folder / "__init__.py").exists())
    assert not missing_init, f"rooms without __init__.py (pytest would confuse their modules): {missing_init}"


def test_no_test_file_name_is_used_twice() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    doubled = sorted(name for name, count in names.items() if count > 1)
    assert not doubled, f"test file names used more than once under tests/: {doubled}"
