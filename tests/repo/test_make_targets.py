"""The Makefile is an entry point: every target a newcomer may call says what it does (`make help`), and
docs/development.md's table of targets is what those `##` lines write (`make make-targets`)."""

from __future__ import annotations

import subprocess

from tests import make_targets

# What .ci/run and the README call, and the lab's targets other pages name: each must exist and say what it does.
CALLED = (
    "run",
    "test",
    "lint",
    "test-clients",
    "test-vllm",
    "soak-quick",
    "container-test",
    "eval-business-quick",
    "frontier-runs",
    "frontier",
    "replay",
    "eval-headline",
    "eval-tuning",
    "eval-tuning-2",
    "eval-tuning-3",
)


def test_the_development_guide_holds_the_table_the_makefiles_write():
    assert make_targets.PAGE.read_text() == make_targets.written(), "out of date: run `make make-targets`"


def test_every_called_target_is_described():
    described = make_targets.targets()
    assert not [name for name in CALLED if name not in described]
    assert all(described[name] for name in CALLED)


def test_a_description_belongs_to_the_rule_below_it(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text("## Builds it.\nVAR ?= 1\nbuild: dep\n\tdo\n\nquiet:\n\tdo\n## Two targets.\na b: dep\n")
    assert make_targets.targets((makefile,)) == {"build": "Builds it.", "a": "Two targets.", "b": "Two targets."}


def test_make_help_lists_the_lab_targets_too():
    shown = subprocess.run(["make", "-s", "help"], cwd=make_targets.ROOT, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "make eval-tuning-2 " in shown.stdout and "make run " in shown.stdout


def dry_run(target: str) -> str:
    made = subprocess.run(["make", "-n", "-o", "install", target], cwd=make_targets.ROOT, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    return " ".join(made.stdout.replace("\\\n", " ").split())


def test_the_tuning_blocks_run_one_recipe_over_their_table():
    blocks = {"eval-tuning": (50, ""), "eval-tuning-2": (91, "_2"), "eval-tuning-3": (95, "_3")}
    for block, (limit, suffix) in blocks.items():
        command = dry_run(block)
        assert f"--limit {limit} " in command, command
        assert f"--exclude bench/eval/tuning_block{suffix}_only.txt --name {block}" in command, command


def test_targets_fall_in_the_sections_their_markers_open(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text("## Early.\nearly:\n\n##@ tests\n\n## Runs them.\ncheck:\n\n##@ docs\n## Writes it.\ndoc:\n")
    assert make_targets.sections((makefile,)) == {
        "other": {"early": "Early."},
        "tests": {"check": "Runs them."},
        "docs": {"doc": "Writes it."},
    }


def test_make_help_shows_the_readmes_two_commands_first_then_every_section_once():
    (first, set_up), *others = make_targets.grouped().items()
    assert list(set_up) == list(make_targets.SET_UP) == ["run", "test"]
    shown = [name for _, found in others for name in found]
    assert len(shown) == len(set(shown)) == len(make_targets.targets()) - 2
    assert "other" not in dict(others) and len(others) >= 8
