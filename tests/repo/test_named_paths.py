"""Every repository path a comment, docstring, doc page or build file names exists: a renamed or retired file leaves
no pointer behind (eight comments once pointed to bench scripts that were gone)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("services", "bench", "clients", "docs", "deploy", "tests", "protos", ".ci")
# A path at the start of a word, under one of the top folders, ending in a word character; not one named in a
# commit (`dde7d7c:bench/results/business.json`, git's syntax for a file of the history).
NAMED = re.compile(rf"(?<![\w/.-])(?<![0-9a-f]{{7}}:)((?:{'|'.join(re.escape(t) for t in TOP)})/[\w./-]*\w)")
READ = (".py", ".md", ".go", ".ts", ".sh", ".mk", ".toml", ".yaml", ".yml", "Makefile")
# Files a command writes and the repository does not keep (outputs of runs not committed, build folders).
WRITTEN_NOT_KEPT = {
    "bench/studies/unfiled",  # what the lab writes before a study declares it (bench-confidence-stop, …)
    "deploy/.build",  # deploy/images.sh's staging folder
    "clients/go/bin",  # the Go client's built commands
}


def named_paths(text: str) -> list[str]:
    """The paths a text names, leaving out patterns (`<name>`, `*`, `{a,b}`, `$(VAR)`) and prefixes of them."""
    found = []
    for match in NAMED.finditer(text):
        path, after = match[1].rstrip("."), text[match.end() : match.end() + 2]
        if any(c in path for c in "<>*{}$") or after[:1] in "{*<-[/" or after in (".{", ".*", ".<"):
            continue
        found.append(path)
    return found


def exists(path: str, named_in: Path) -> bool:
    if any(path == kept or path.startswith(kept + "/") for kept in WRITTEN_NOT_KEPT):
        return True
    candidates = (ROOT / path, named_in.parent / path)
    return any(c.exists() or c.with_name(c.name + ".gz").exists() for c in candidates)  # runs files may be .gz


def tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in listed.splitlines() if f.endswith(READ) and not recorded(f)]


def recorded(path: str) -> bool:
    """A study's runs and summaries are records of their day, not pointers; its manifest and index are read."""
    return path.startswith("bench/studies/") and path.count("/") == 3 and not path.endswith(("/README.md", ".toml"))


def test_the_check_reads_patterns_as_patterns():
    text = "see services/deliberate/core, bench/studies/<s>/x.json, bench/studies/cascade/c.{json,md}, docs/eval.md."
    assert named_paths(text) == ["services/deliberate/core", "docs/eval.md"]
    assert named_paths("git show dde7d7c:bench/results/business.json") == []


def test_every_named_path_exists():
    gone = sorted(
        f"{path} (named in {file.relative_to(ROOT)})"
        for file in tracked()
        if file.is_file()
        for path in named_paths(file.read_text(errors="ignore"))
        if not exists(path, file)
    )
    assert not gone, "\n".join(gone)
