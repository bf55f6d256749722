"""Request JSON Schemas: metaschema checks with clear messages, validators cached by text."""

from __future__ import annotations

import json

import pytest

from deliberate.core import schemas
from deliberate.core.schemas import check_schema

PLAN_SCHEMA = {
    "type": "object",
    "properties": {"selected_ids": {"type": "array", "items": {"type": "integer"}, "minItems": 5}},
    "required": ["selected_ids"],
}


def test_check_schema_returns_the_parsed_schema():
    assert check_schema(json.dumps(PLAN_SCHEMA)) == PLAN_SCHEMA


def test_check_schema_returns_a_copy_and_caches_the_validator():
    schema_text = json.dumps({"type": "object", "title": "cache probe"})
    check_schema(schema_text)["title"] = "mutated by a caller"
    hits_before = schemas.compiled_validator.cache_info().hits

    assert check_schema(schema_text)["title"] == "cache probe"
    assert schemas.compiled_validator.cache_info().hits == hits_before + 1


@pytest.mark.parametrize(
    ("schema_text", "message"),
    [
        (
            '{"type": "nope"}',
            "is invalid at $.type: 'nope' is not valid under any of the given schemas",
        ),
        ("not json", "is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
        ('{"type": "object",}', "is not valid JSON: "),  # json's wording varies by version
        ("[1, 2]", "must be a JSON object, got list"),
        ("true", "must be a JSON object, got bool"),
        (
            '{"items": [{"type": "integer"}]}',
            "is invalid at $.items: ",
        ),  # draft-07 style in 2020-12
    ],
)
def test_check_schema_rejects(schema_text, message):
    with pytest.raises(ValueError) as raised:
        check_schema(schema_text)

    assert str(raised.value).startswith(message)


@pytest.mark.timeout(10)
def test_check_schema_rejects_hostile_text():
    with pytest.raises(ValueError, match="not valid JSON"):
        check_schema("[" * 50_000)
    with pytest.raises(ValueError, match="too large"):
        check_schema(" " * 1_000_000)
