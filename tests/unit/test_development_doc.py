"""docs/development.md names the files each extension point touches: every one of them exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs/development.md"


def test_every_path_the_development_guide_names_exists():
    named = set(re.findall(r"`((?:services|tests|bench|clients|protos|docs)/[^`<>…*\s]+)`", GUIDE.read_text()))
    assert len(named) >= 15, "the guide names the files of each extension point"
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"docs/development.md names files that do not exist: {missing}"


def test_every_docs_page_is_reachable_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    unlinked = [page for page in pages if f"docs/{page}" not in readme]
    assert not unlinked, f"README.md links no docs/ page named {unlinked}"
