"""JSON Schemas arriving in requests: checked against their metaschema once, compiled validators cached by text.

Validation has a fast path: jsonschema-rs (Rust, ~1 µs) decides valid or not; only a failing value goes
through the Python `jsonschema` validator (~60 µs) for its precise, path-naming error message.

Regular expressions (`pattern`, `patternProperties`, and the property names `additionalProperties` and
`unevaluatedProperties` compare with them) run on jsonschema-rs's engine in both validators, never on Python's `re`:
`re` backtracks exponentially, so `^(a+)+$` against a 40-character "aaaa…!" in a draft would hold the Verifier for
hours. That engine is Rust's `regex` (linear in the text), or fancy-regex with a backtracking limit for
look-arounds and back-references. A pattern it cannot compile is not a "regex" to the metaschema check, so the
request is refused. Both validators thus read a pattern the same way, as ECMA-262-like Rust syntax (`\\p{L}` works,
Python-only syntax such as `(?P=name)` does not).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker, _keywords, _legacy_keywords, _utils, exceptions, validators

MAX_SCHEMA_CHARS = 64 * 1024
MAX_DETAIL_CHARS = 200


def check_schema(schema_text: str) -> dict:
    """Parses a JSON Schema and validates it against its metaschema; raises ValueError saying why not.

    The metaschema is the one the schema's ``$schema`` declares, Draft 2020-12 otherwise. The compiled
    validator is cached by schema text, so verifying drafts against a checked schema is cheap.
    """
    compiled_validator(schema_text)
    return json.loads(schema_text)  # a fresh copy: callers must not mutate the cached schema


@dataclass(frozen=True)
class CompiledSchema:
    explain: validators.Validator  # the reference implementation, for messages
    fast: object | None  # jsonschema-rs validator; None if it cannot compile what jsonschema accepts

    def first_error(self, value: object) -> exceptions.ValidationError | None:
        """The most relevant error, or None when `value` is valid."""
        if self.fast is not None and self.fast.is_valid(value):
            return None
        return exceptions.best_match(self.explain.iter_errors(value))


@functools.lru_cache(maxsize=256)
def compiled_validator(schema_text: str) -> CompiledSchema:
    if not isinstance(schema_text, str):
        raise ValueError(f"must be JSON text, got {type(schema_text).__name__}")
    if len(schema_text) > MAX_SCHEMA_CHARS:
        raise ValueError(f"is too large: {len(schema_text)} characters > {MAX_SCHEMA_CHARS}")
    try:
        schema = json.loads(schema_text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"is not valid JSON: {shorten(str(exc), MAX_DETAIL_CHARS)}") from None
    if not isinstance(schema, dict):
        raise ValueError(f"must be a JSON object, got {type(schema).__name__}")
    validator_class = validators.validator_for(schema, default=Draft202012Validator)
    try:
        validator_class.check_schema(schema, format_checker=schema_format_checker(validator_class))
    except exceptions.SchemaError as exc:
        raise ValueError(f"is invalid at {exc.json_path}: {shorten(exc.message, MAX_DETAIL_CHARS)}") from None
    except RecursionError:
        raise ValueError("is nested too deeply") from None
    try:
        fast = jsonschema_rs.validator_for(schema)
    except Exception:  # e.g. a format or dialect only the reference implementation knows
        fast = None
    return CompiledSchema(validator_class(schema), fast)


@functools.lru_cache(maxsize=1024)
def bounded_regex(pattern: str):
    """`pattern` compiled by jsonschema-rs (see the module docstring); ValueError when it cannot be."""
    return jsonschema_rs.validator_for({"pattern": pattern})


class BoundedRe:
    """Stands in for the `re` module in jsonschema's keyword modules, whose only use of it is
    `re.search(pattern, text)` (jsonschema 4.x): the search runs on `bounded_regex`."""

    @staticmethod
    def search(pattern: str, text: str) -> bool:
        return bounded_regex(pattern).is_valid(text)

    def __getattr__(self, name: str):  # whatever else a later jsonschema reads there: the real module
        return getattr(re, name)


for _module in (_keywords, _legacy_keywords, _utils):
    _module.re = BoundedRe()


@functools.cache
def schema_format_checker(validator_class: type[validators.Validator]) -> FormatChecker:
    """The draft's own format checker, whose "regex" (what `pattern` values must be) is what `bounded_regex`
    compiles."""
    checker = FormatChecker(())  # FormatChecker(formats) would look them up among the latest draft's only
    checker.checkers = dict(validator_class.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=ValueError)(lambda value: not isinstance(value, str) or bounded_regex(value))
    return checker


def shorten(text: str, limit: int) -> str:
    """One line of at most `limit` characters, so messages stay one auditable line."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
