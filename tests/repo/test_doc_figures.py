"""Every figure the README and docs/ write as a reference to a results file shows that file's value
(deliberate_bench.figures): a figure cannot drift from its file."""

from __future__ import annotations

import json

import pytest

from deliberate_bench import figures

RESULT = {"configs": [{"name": "pipeline@5", "accuracy": 0.685, "p50": 21.04}, {"name": "qwen2.5-1.5b", "n": 3}]}


@pytest.fixture
def page(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(RESULT))

    def write(text: str):
        (tmp_path / "p.md").write_text(text)
        (reference,) = figures.references(tmp_path / "p.md")
        return reference

    return write


def test_every_figure_in_the_docs_shows_its_files_value():
    count, wrong = figures.check()
    assert count >= 20, "the README and docs name their headline figures by reference"
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "text",
    [
        '[68.5 %](r.json "configs[name=pipeline@5].accuracy")',
        '[21.0 s](r.json "configs[name=pipeline@5].p50")',
        '[3](r.json "configs[name=qwen2.5-1.5b].n")',
        '[pipeline@5](r.json "configs[0].name")',
        '[0.685](r.json "configs[name=pipeline@5,p50=21.04].accuracy")',
    ],
)
def test_a_figure_that_shows_its_value_passes(page, text):
    assert figures.mismatch(page(text)) is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('[68.4 %](r.json "configs[name=pipeline@5].accuracy")', "the file 68.5"),
        ('[21.1 s](r.json "configs[name=pipeline@5].p50")', "the file 21.04"),
        ('[68.5 %](r.json "configs[name=pipeline@3].accuracy")', "matches 0 elements"),
        ('[68.5 %](r.json "configs[name=pipeline@5].recall")', "no key 'recall'"),
        ('[68.5 %](gone.json "configs[0].accuracy")', "no file"),
    ],
)
def test_a_figure_that_drifted_from_its_file_is_named(page, text, why):
    assert why in figures.mismatch(page(text))


def test_a_copied_table_must_be_a_run_of_its_files_lines(tmp_path):
    (tmp_path / "r.md").write_text("title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    page = tmp_path / "p.md"
    page.write_text("<!-- copied from r.md -->\n| a | b |\n|---|---|\n| 1 | 2 |\n<!-- end of copy -->\n")
    (copy,) = figures.copies(page)
    assert figures.copy_mismatch(copy) is None
    page.write_text("<!-- copied from r.md -->\n| a | b |\n|---|---|\n| 1 | 3 |\n<!-- end of copy -->\n")
    assert "'| 1 | 3 |' is not the file's" in figures.copy_mismatch(figures.copies(page)[0])


def test_no_measured_figure_outside_a_reference():
    unreferenced = [line for page in figures.pages() for line in figures.loose(page)]
    assert not unreferenced, "write them as references to their results file (docs: figures.py)\n" + "\n".join(
        unreferenced
    )


def test_a_measured_figure_must_reference_its_file_or_say_why_not(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    page = tmp_path / "p.md"
    page.write_text(
        'Right on [68.5 %](r.json "configs[0].accuracy") in `0.5 s` steps.\n\n```\n1.5 s\n```\n\n'
        "The program took 6.17 s\nagainst 5.3 s.\n\n"
        "<!-- figures not kept: a run not committed -->\nIt took 9.9 s.\n"
    )
    assert figures.loose(page) == ["p.md:7: 6.17 s", "p.md:8: 5.3 s"]


def test_write_moves_a_drifted_figure_to_its_files_value_in_the_same_digits(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    (tmp_path / "r.json").write_text(json.dumps({**RESULT, "gap": 2.04, "loss": -1.26, "amount": 117945.24}))
    page = tmp_path / "p.md"
    page.write_text(
        'Right on [68.4 %](r.json "configs[name=pipeline@5].accuracy") at [21.1 s](r.json "configs[0].p50"), '
        '[+1.5](r.json "gap") points, [−0.5](r.json "loss"), [117,900](r.json "amount"); '
        '[68.5 %](r.json "configs[0].accuracy").\n'
    )
    changed = figures.rewritten(page)
    assert page.read_text() == (
        'Right on [68.5 %](r.json "configs[name=pipeline@5].accuracy") at [21.0 s](r.json "configs[0].p50"), '
        '[+2.0](r.json "gap") points, [−1.3](r.json "loss"), [117,945](r.json "amount"); '
        '[68.5 %](r.json "configs[0].accuracy").\n'
    )
    assert changed == ["p.md:1: 68.4 % → 68.5 %", "p.md:1: 21.1 s → 21.0 s", "p.md:1: +1.5 → +2.0",
                       "p.md:1: −0.5 → −1.3", "p.md:1: 117,900 → 117,945"]  # fmt: skip
    assert figures.rewritten(page) == [] and all(figures.mismatch(r) is None for r in figures.references(page))
