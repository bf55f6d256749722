"""The `deliberate` commands registered as `deliberate.commands` entry points (pyproject.toml, bench/pyproject.toml)
are the ones the client names in SERVER_COMMANDS.

One list cannot serve all three distributions: entry points are static metadata of two, and the client, which depends
on neither, must still say which to install for a command it lacks. So the client's SERVER_COMMANDS is the source
of each command's name and purpose (every `add_command` takes its help from there) and LAB_COMMANDS of its
distribution; this test holds the entry points to them.
"""

from __future__ import annotations

import argparse
import importlib
import tomllib
from pathlib import Path

import pytest

from deliberate_client.cli import COMMANDS_GROUP, LAB_COMMANDS, SERVER_COMMANDS

ROOT = Path(__file__).resolve().parents[2]
SERVERS_PYPROJECT = ROOT / "pyproject.toml"
LAB_PYPROJECT = ROOT / "bench" / "pyproject.toml"


def registered(pyproject: Path) -> dict[str, str]:
    """The command entry points a pyproject.toml declares: name → `module:function`."""
    return tomllib.loads(pyproject.read_text())["project"]["entry-points"][COMMANDS_GROUP]


def test_the_client_names_every_registered_command_and_its_distribution():
    servers, lab = registered(SERVERS_PYPROJECT), registered(LAB_PYPROJECT)
    assert sorted(SERVER_COMMANDS) == sorted(servers | lab)
    assert sorted(LAB_COMMANDS) == sorted(lab)


@pytest.mark.parametrize(
    ("name", "target"), sorted((registered(SERVERS_PYPROJECT) | registered(LAB_PYPROJECT)).items())
)
def test_each_entry_point_adds_its_command_with_the_clients_purpose(name, target):
    module, function = target.split(":")
    commands = argparse.ArgumentParser().add_subparsers()
    getattr(importlib.import_module(module), function)(commands)
    assert list(commands.choices) == [name]
    (action,) = commands._choices_actions  # the subcommand's help lives only on this pseudo-action
    assert action.help == SERVER_COMMANDS[name]
