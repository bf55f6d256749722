"""bench/runs/ and bench/results/ hold only declared files, each with the command that writes it and the page that
cites it, and their READMEs are the table written from that declaration (bench/deliberate_bench/index.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deliberate_bench import index

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("directory", list(index.FILES), ids=lambda d: d.name)
def test_every_file_is_declared_and_every_declared_file_exists(directory):
    assert not index.undeclared(directory), "declare them in deliberate_bench/index.py, or remove them"
    assert not index.missing(directory)


@pytest.mark.parametrize("directory", list(index.FILES), ids=lambda d: d.name)
def test_the_readme_is_up_to_date(directory):
    assert (directory / "README.md").read_text() == index.readme(directory), "deliberate bench index --write"


def test_every_citation_is_a_docs_page():
    pages = {entry.cited.partition("#")[0] for entries in index.FILES.values() for entry in entries}
    assert not [page for page in pages if not (DOCS / page).exists()]


def test_a_stray_file_is_reported(tmp_path, monkeypatch):
    (tmp_path / "stray.json").write_text("{}")
    monkeypatch.setitem(index.FILES, tmp_path, (index.Entry(("kept.json",), "make x", "eval.md"),))
    assert index.undeclared(tmp_path) == ["stray.json"] and index.missing(tmp_path) == ["kept.json"]
