"""Shared plumbing: settings from flags and environment, request validation, schema checks."""

from __future__ import annotations

import pytest

from deliberate.core.config import parse_settings
from deliberate.core.requests import InvalidArgument, parse_output_schema, sampling_from_proto
from deliberate.drafter.settings import DrafterSettings
from deliberate.engines.base import SamplingParams
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
    defaults = SamplingParams()
    proto = common_pb2.SamplingParams(temperature=0.9, seed=3)
    params = sampling_from_proto(proto, defaults)
    assert params.temperature == pytest.approx(0.9)
    assert params.seed == 3
    assert params.top_p == defaults.top_p and params.max_new_tokens == defaults.max_new_tokens


def test_output_schema_is_checked_against_its_metaschema():
    assert parse_output_schema("") is None
    assert parse_output_schema('{"type": "object"}') == {"type": "object"}
    with pytest.raises(InvalidArgument, match="^output_schema: is not valid JSON"):
        parse_output_schema("{nope")
    with pytest.raises(InvalidArgument, match="^output_schema: is invalid at"):
        parse_output_schema('{"type": "nope"}')
    with pytest.raises(InvalidArgument, match="^output_schema: must be a JSON object"):
        parse_output_schema("[1, 2]")
