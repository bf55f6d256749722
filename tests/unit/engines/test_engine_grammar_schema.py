"""What llama.cpp's grammar gets of an output schema: the keywords its converter refuses are left out, at every
level of subschemas, and nothing else changes."""

from __future__ import annotations

from deliberate.engines.llamacpp_engine import GRAMMAR_UNSUPPORTED, grammar_schema
from deliberate_client.examples import ads


def test_the_ad_schema_loses_only_unique_items():
    grammar = grammar_schema(ads.OUTPUT_SCHEMA)
    ids = dict(ads.OUTPUT_SCHEMA["properties"]["selected_ids"])
    del ids["uniqueItems"]
    assert grammar == {**ads.OUTPUT_SCHEMA, "properties": {"selected_ids": ids}}
    assert "uniqueItems" in ads.OUTPUT_SCHEMA["properties"]["selected_ids"], "the schema itself is not changed"


def test_refused_keywords_go_at_every_level_and_names_and_data_stay():
    schema = {
        "type": "object",
        "not": {"required": ["x"]},
        "properties": {
            "not": {"type": "string", "enum": ["if", "then"]},  # a property named like a keyword
            "tags": {"type": "array", "items": {"type": "string", "propertyNames": {}}, "uniqueItems": True},
            "pair": {"prefixItems": [{"type": "integer", "not": {"const": 0}}, {"const": {"uniqueItems": 1}}]},
        },
        "anyOf": [{"required": ["tags"], "if": {}}, {"required": ["pair"]}],
        "$defs": {"a": {"type": "array", "contains": {"type": "integer"}}},
        "additionalProperties": {"type": "integer", "dependentRequired": {}},
    }
    assert grammar_schema(schema) == {
        "type": "object",
        "properties": {
            "not": {"type": "string", "enum": ["if", "then"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "pair": {"prefixItems": [{"type": "integer"}, {"const": {"uniqueItems": 1}}]},
        },
        "anyOf": [{"required": ["tags"]}, {"required": ["pair"]}],
        "$defs": {"a": {"type": "array"}},
        "additionalProperties": {"type": "integer"},
    }


def test_a_schema_the_grammar_takes_whole_is_unchanged():
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}, "required": ["a"]}
    assert grammar_schema(schema) == schema
    assert {"uniqueItems", "contains", "not", "if", "propertyNames", "dependentRequired"} <= GRAMMAR_UNSUPPORTED
