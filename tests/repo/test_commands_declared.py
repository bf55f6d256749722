"""The `deliberate` commands registered as `deliberate.commands` entry points (pyproject.toml, bench/pyproject.toml).

The servers' commands are the ones the client names in SERVER_COMMANDS (so that the client alone can say what to
install for them; every server `add_command` takes its help from there). The lab registers one command, `bench`, and
the client names none of it: `deliberate bench --help` lists the lab's programs from its own registry.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import tomllib
from pathlib import Path

import pytest

from deliberate_bench.command import BENCHMARKS, ROOMS, listing, room
from deliberate_client import cli
from deliberate_client.cli import COMMANDS_GROUP, SERVER_COMMANDS

ROOT = Path(__file__).resolve().parents[2]
SERVERS_PYPROJECT = ROOT / "pyproject.toml"
LAB_PYPROJECT = ROOT / "bench" / "pyproject.toml"


def registered(pyproject: Path) -> dict[str, str]:
    """The command entry points a pyproject.toml declares: name → `module:function`."""
    return tomllib.loads(pyproject.read_text())["project"]["entry-points"][COMMANDS_GROUP]


def added(target: str) -> argparse._SubParsersAction:
    module, function = target.split(":")
    commands = argparse.ArgumentParser().add_subparsers()
    getattr(importlib.import_module(module), function)(commands)
    return commands


def test_the_client_names_the_servers_commands_and_no_lab_command():
    assert sorted(SERVER_COMMANDS) == sorted(registered(SERVERS_PYPROJECT))
    assert list(registered(LAB_PYPROJECT)) == ["bench"]
    source = inspect.getsource(cli)
    for lab_word in ("deliberate-bench", "train-judge", "LAB_COMMANDS", '"eval"', '"dataset"'):
        assert lab_word not in source


@pytest.mark.parametrize(("name", "target"), sorted(registered(SERVERS_PYPROJECT).items()))
def test_each_server_entry_point_adds_its_command_with_the_clients_purpose(name, target):
    commands = added(target)
    assert list(commands.choices) == [name]
    (action,) = commands._choices_actions  # the subcommand's help lives only on this pseudo-action
    assert action.help == SERVER_COMMANDS[name]


def test_the_lab_is_one_command_whose_help_lists_every_program_room_by_room():
    commands = added(registered(LAB_PYPROJECT)["bench"])
    assert list(commands.choices) == ["bench"]
    text = commands.choices["bench"].format_help()
    for name, program in BENCHMARKS.items():
        assert f"    {name} " in text and program.purpose in text
        assert room(program) in ROOMS
    assert listing() in text
    assert {"eval", "dataset", "train-judge"} <= set(BENCHMARKS)
