"""Shared plumbing: settings from flags and environment, request validation, schema checks."""

from __future__ import annotations

import pytest

from deliberate.core.config import parse_settings
from deliberate.core.requests import InvalidArgument, parse_output_schema, sampling_overrides
from deliberate.drafter.settings import DrafterSettings
from deliberate_api.common.v1 import common_pb2


def test_flag_beats_environment_beats_default(monkeypatch):
    assert parse_settings(DrafterSettings, []).max_drafts == 8
    monkeypatch.setenv("DELIBERATE_MAX_DRAFTS", "6")
    assert parse_settings(DrafterSettings, []).max_drafts == 6
    assert parse_settings(DrafterSettings, ["--max-drafts", "4"]).max_drafts == 4


def test_a_malformed_setting_is_refused(monkeypatch):
    monkeypatch.setenv("DELIBERATE_PORT", "not-a-port")
    with pytest.raises(ValueError, match="port"):
        parse_settings(DrafterSettings, [])


def test_sampling_overrides_only_what_is_set():
    proto = common_pb2.SamplingParams(temperature=0.9, seed=3)
    assert sampling_overrides(proto) == {"temperature": pytest.approx(0.9), "seed": 3}


def test_output_schema_is_checked_against_its_metaschema():
    assert parse_output_schema("") is None
    assert parse_output_schema('{"type": "object"}') == {"type": "object"}
    with pytest.raises(InvalidArgument, match="^output_schema: is not valid JSON"):
        parse_output_schema("{nope")
    with pytest.raises(InvalidArgument, match="^output_schema: is invalid at"):
        parse_output_schema('{"type": "nope"}')
    with pytest.raises(InvalidArgument, match="^output_schema: must be a JSON object"):
        parse_output_schema("[1, 2]")


def test_core_imports_no_engine():
    """core/ is plumbing every service shares; engines build on it, never the other way round (not even inside a
    function, which the floors of tests/repo/test_service_structure.py do not see)."""
    from pathlib import Path

    import deliberate.core
    from tests.import_graph import imported_names

    core = Path(deliberate.core.__file__).parent
    engine_imports = [
        f"{module.name}: {name}"
        for module in sorted(core.glob("*.py"))
        for name in imported_names(module, "deliberate.core")
        if name.startswith("deliberate.engines")
    ]
    assert engine_imports == []
