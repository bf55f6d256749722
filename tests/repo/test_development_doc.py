"""The README is a front page that reaches every docs/ page; docs/development.md names the files each extension
point touches, and every one of them exists; every relative link of the README and docs/ resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs/development.md"
README = ROOT / "README.md"
README_MAX_LINES = 220
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def test_every_path_the_development_guide_names_exists():
    named = set(re.findall(r"`((?:services|tests|bench|clients|protos|docs)/[^`<>…*\s]+)`", GUIDE.read_text()))
    assert len(named) >= 15, "the guide names the files of each extension point"
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"docs/development.md names files that do not exist: {missing}"


def test_every_docs_page_is_reachable_from_the_readme():
    readme = README.read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    unlinked = [page for page in pages if f"](docs/{page})" not in readme]
    assert not unlinked, f"README.md links no docs/ page named {unlinked}: add it to the README's Documentation index"


def test_the_readme_is_a_front_page():
    readme = README.read_text()
    lines = len(readme.splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, at most {README_MAX_LINES}: move the detail into a docs/ page and link it"
    )
    assert "make run " in readme and "make test " in readme, "the README's two set-up commands"
    assert "](docs/development.md)" in readme


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, …"""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", page.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        if seen[slug]:
            seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def test_every_relative_link_of_the_readme_and_docs_resolves():
    broken = []
    for page in [README, *sorted((ROOT / "docs").rglob("*.md"))]:  # docs/experiments/ too
        for target in re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
