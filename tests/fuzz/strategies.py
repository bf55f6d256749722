"""Hypothesis strategies for the requests the services take: odd text, numbers at and past every bound (nan and
inf included), deeply nested contexts, expensive or malformed CEL, JSON Schemas with pathological patterns or
nesting, drafts full of huge numbers and broken JSON. Each strategy mixes valid requests with invalid ones, so
both the edge's refusals and the work behind it are exercised."""

from __future__ import annotations

import json
import math

from hypothesis import strategies as st

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2

# Code points that break naive text handling: NUL, controls, BOM, bidi overrides, zero-width joiners,
# combining marks, non-ASCII digits, the last code point, a non-character, full-width and math symbols.
ODD_CHARACTERS = "\x00\x07\x1b\x7f\u0085\u00a0\u200b\u200d\u202e\u2066\ufeff\ufffd\uffff\U0010ffff\u0301" + (
    "٣५５𝟘−×÷≈∞½"
)
EDGE_TEXTS = ["", " ", "\t\n\r", "\u3000", "\u0301" * 64, "🧪" * 100, "\ud7ff\ue000", "a\x00b", "Final answer: 42"]

SURROGATES = st.one_of(st.characters(categories=["Cs"]), st.sampled_from("a😀"))
surrogate_texts = st.text(SURROGATES, max_size=3)
characters = st.one_of(st.characters(exclude_categories=("Cs",)), st.sampled_from(ODD_CHARACTERS))


def text(max_size: int = 40) -> st.SearchStrategy[str]:
    return st.one_of(st.text(characters, max_size=max_size), st.sampled_from(EDGE_TEXTS))


def around(limit: int) -> st.SearchStrategy[str]:
    """A string just under, at or just over `limit` characters (a character that may be multi-byte)."""
    return st.builds(lambda c, n: c * n, st.sampled_from("a€🧪 "), st.sampled_from([limit - 1, limit, limit + 1]))


def field_text(max_size: int, limit: int) -> st.SearchStrategy[str]:
    return st.one_of(text(max_size), around(limit))


# Numbers at every bound, past them, and not numbers at all.
EDGE_FLOATS = [0.0, -0.0, 0.01, 0.009, 1.0, 1.0000001, 2.0, 2.0000002, -2.0, -2.0000002, 1e-45, -1e-45, 3.4e38,
               -3.4e38, math.inf, -math.inf, math.nan]  # fmt: skip
floats = st.one_of(st.sampled_from(EDGE_FLOATS), st.floats(width=32))
int32 = st.one_of(st.sampled_from([0, 1, -1, 8, 9, 1024, 1025, 2**31 - 1, -(2**31)]), st.integers(-(2**31), 2**31 - 1))
int64 = st.one_of(st.sampled_from([0, -1, 2**63 - 1, -(2**63)]), st.integers(-(2**63), 2**63 - 1))


def mostly(usual, rare):
    """`usual` about three times in four: enough valid requests reach the work behind the edge."""
    return st.sampled_from([usual, usual, usual, rare]).flatmap(lambda chosen: chosen)


def optional(strategy):
    return st.one_of(st.none(), strategy)


@st.composite
def sampling(draw) -> common_pb2.SamplingParams:
    """Mostly within the documented ranges (core/limits.py SAMPLING), sometimes anything at all."""
    fields = {
        "temperature": draw(optional(mostly(st.floats(0.0, 2.0, width=32), floats))),
        "top_p": draw(optional(mostly(st.floats(0.25, 1.0, width=32), floats))),
        "max_new_tokens": draw(optional(mostly(st.integers(1, 1024), int32))),
        "presence_penalty": draw(optional(mostly(st.floats(-2.0, 2.0, width=32), floats))),
        "frequency_penalty": draw(optional(mostly(st.floats(-2.0, 2.0, width=32), floats))),
        "seed": draw(optional(int64)),
    }
    return common_pb2.SamplingParams(**{name: value for name, value in fields.items() if value is not None})


# --- JSON values and contexts ---------------------------------------------------------------------------------

json_numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([2**53 + 1, 10**300, -(10**300), 1e308, 5e-324]),
)
json_scalars = st.one_of(st.none(), st.booleans(), json_numbers, text(20))
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=6), st.dictionaries(text(12), children, max_size=6)),
    max_leaves=40,
)


def nest(depth: int, leaf: object, kind: str) -> object:
    value = leaf
    for _ in range(depth):
        value = {"a": value} if kind == "object" else [value]
    return value


# Past about 30 levels a context exceeds protobuf's nesting limit: the edge refuses the bytes (INVALID_ARGUMENT).
deep_values = st.builds(
    nest, mostly(st.integers(1, 30), st.integers(31, 120)), json_scalars, st.sampled_from(["object", "array"])
)
# A Struct number may be nan or inf (the wire allows any double), unlike a JSON number.
struct_leaves = mostly(json_scalars, st.sampled_from([math.nan, math.inf, -math.inf]))
struct_values = st.recursive(
    struct_leaves,
    lambda children: st.one_of(st.lists(children, max_size=6), st.dictionaries(text(12), children, max_size=6)),
    max_leaves=40,
)
# What the rule packs and CEL expressions read: ids, a budget, a catalog of ads.
CONTEXT_KEYS = ["items", "ids", "budget", "catalog", "limit", "l", "m", "name"]
big_lists = st.builds(lambda n, v: [v] * n, st.sampled_from([0, 1, 100, 1000, 5000]), json_scalars)


def struct_number(value):
    """Struct numbers are doubles: an integer past the double range goes in as a float (inf)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value) if abs(value) < 2**1023 else math.copysign(math.inf, value)
    if isinstance(value, list):
        return [struct_number(v) for v in value]
    if isinstance(value, dict):
        return {k: struct_number(v) for k, v in value.items()}
    return value


# Struct-ready dicts, set in place (`request.context.update`): a message's constructor would refuse nesting past
# protobuf's depth limit, which a request may well exceed (the edge answers it INVALID_ARGUMENT).
contexts = st.builds(
    struct_number,
    st.dictionaries(
        st.one_of(st.sampled_from(CONTEXT_KEYS), text(12)),
        st.one_of(mostly(json_values, struct_values), deep_values, big_lists),
        max_size=5,
    ),
)

# --- CEL ------------------------------------------------------------------------------------------------------

CEL_ATOMS = ["answer", "plan", "text", "ctx", "ctx.items", "ctx.l", "ctx.budget", "answer.ids", "1", "-1", "0",
             "1.5", "9223372036854775807", "-9223372036854775808", "18446744073709551615u", "1e308", "true",
             "null", "'a'", '"\\u0000"', "b'x'", "[]", "{}", "[1, 2, 3]", "{'k': 1}", "x", "y"]  # fmt: skip
CEL_BINARY = ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "in"]
CEL_MACROS = ["all", "exists", "exists_one", "map", "filter"]


def cel_tree(children):
    return st.one_of(
        st.builds(lambda a, op, b: f"{a} {op} {b}", children, st.sampled_from(CEL_BINARY), children),
        st.builds(lambda a: f"({a})", children),
        st.builds(lambda a: f"!{a}", children),
        st.builds(lambda a: f"size({a})", children),
        st.builds(lambda a, b, c: f"{a} ? {b} : {c}", children, children, children),
        st.builds(lambda a, m, b: f"{a}.{m}(x, {b})", children, st.sampled_from(CEL_MACROS), children),
        st.builds(
            lambda a, f, b: f"{a}.{f}({b})",
            children,
            st.sampled_from(["contains", "startsWith", "matches", "endsWith"]),
            children,
        ),  # fmt: skip
        st.builds(lambda a, b: f"{a}[{b}]", children, children),
        st.builds(lambda a: f"int({a})", children),
        st.builds(lambda a: f"string({a})", children),
    )


cel_generated = st.recursive(st.sampled_from(CEL_ATOMS), cel_tree, max_leaves=12)


def nested_macros(depth: int) -> str:
    """`ctx.l.all(x0, ctx.l.all(x1, … true))`: depth loops over the context's list."""
    expression = "true"
    for level in reversed(range(depth)):
        expression = f"ctx.l.all(x{level}, {expression})"
    return expression


CEL_EXPENSIVE = [
    nested_macros(2),
    nested_macros(3),
    nested_macros(6),
    "ctx.l.map(x, ctx.l.map(y, ctx.l)).size() > 0",
    "ctx.l.filter(x, x in ctx.l).size() >= 0",
    "text.matches('(a+)+$')",
    "text.matches('(' * 3)",
    "(" * 600 + "1" + ")" * 600,
    "-" * 2000 + "1",
    "!" * 2000 + "true",
    "[" * 500 + "]" * 500,
    "1 + " * 500 + "1",
    "a." * 600 + "b",
    "ctx" + ".a" * 600,
    "'" + "x" * 2040 + "'",
    "1" * 2049,
]
CEL_VALID = ["true", "size(text) > 0", "answer == 42", "ctx.l.all(x, x != null)", "text.contains('Final')",
             "size(ctx.l) < 10 || ctx.budget > 0", "answer.ids.exists(i, i in ctx.ids)"]  # fmt: skip
cel_expressions = st.one_of(cel_generated, st.sampled_from(CEL_EXPENSIVE), text(60))

# --- JSON Schemas ---------------------------------------------------------------------------------------------

PATHOLOGICAL_PATTERNS = ["^(a+)+$", "(a|a)*$", "(a|aa)+$", "^(\\w+\\s?)*$", "(.*a){25}", "(x+x+)+y", "^(a+)+\\1$",
                         "(?=(a+)+$)", "a{99999999}", "(", "[", "\\p{L}+", "(?P<n>a)(?P=n)", "", ".*"]  # fmt: skip
schema_leaves = st.one_of(
    st.sampled_from([{}, True, False, {"type": "string"}, {"type": "integer"}, {"type": "number"}]),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(PATHOLOGICAL_PATTERNS)),
    st.builds(lambda n: {"multipleOf": n}, st.sampled_from([1e-300, 0.1, 1e308, 3, 0, -1])),
    st.builds(lambda n: {"minLength": n}, st.sampled_from([0, 10**20, -1, 1.5])),
    st.builds(lambda f: {"type": "string", "format": f}, st.sampled_from(["regex", "date-time", "email", "bogus"])),
)
schema_objects = st.recursive(
    schema_leaves,
    lambda children: st.one_of(
        st.builds(lambda c: {"type": "array", "items": c}, children),
        st.builds(lambda k, c: {"type": "object", "properties": {k: c}, "required": [k]}, text(8), children),
        st.builds(
            lambda p, c: {"patternProperties": {p: c}, "additionalProperties": False},
            st.sampled_from(PATHOLOGICAL_PATTERNS),
            children,
        ),  # fmt: skip
        st.builds(lambda a, b: {"anyOf": [a, b]}, children, children),
        st.builds(lambda c: {"not": c}, children),
    ),
    max_leaves=8,
)
SCHEMA_TEXTS = [
    json.dumps({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
    json.dumps({"$ref": "#"}),
    json.dumps({"$ref": "http://example.com/remote.json"}),
    *(
        json.dumps(
            {"$schema": draft, "properties": {"a": {"type": "string", "format": "ip-address", "pattern": "^(a+)+$"}}}
        )
        for draft in [
            "http://json-schema.org/draft-03/schema#",
            "http://json-schema.org/draft-04/schema#",
            "http://json-schema.org/draft-06/schema#",
            "http://json-schema.org/draft-07/schema#",
            "https://json-schema.org/draft/2019-09/schema",
        ]
    ),
    json.dumps({"$schema": "bogus"}),
    json.dumps(nest(300, {}, "object")).replace('"a"', '"not"'),
    "[" * 10000,
    '{"type": "object", "properties": {"a": ' * 2000,
    "null",
    "1e999",
    "{",
]
schema_texts = st.one_of(
    st.builds(json.dumps, schema_objects),
    st.sampled_from(SCHEMA_TEXTS),
    st.builds(
        lambda d: json.dumps(nest(d, {"type": "string"}, "object")).replace('"a"', '"items"'), st.integers(1, 400)
    ),  # fmt: skip
    text(40),
    around(64 * 1024),
)

VALID_SCHEMA = json.dumps({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}}}})

# --- constraints ----------------------------------------------------------------------------------------------

RULE_PACKS = ["arithmetic", "ad_selection", "", "nope", "ARITHMETIC", "arithmetic\x00"]
params = st.builds(
    struct_number,
    st.dictionaries(st.sampled_from(["budget", "catalog", "x"]), mostly(json_values, struct_values), max_size=3),
)


@st.composite
def constraint(draw) -> tuple[dict, dict]:
    """A Constraint's fields and its params, set in place by `add_constraints` (see `contexts`)."""
    kind = draw(mostly(st.sampled_from(["json_schema", "cel_expression", "rule_pack"]), st.none()))
    source = {
        "json_schema": mostly(st.builds(json.dumps, schema_objects), schema_texts),
        "cel_expression": mostly(st.one_of(cel_generated, st.sampled_from(CEL_VALID)), cel_expressions),
        "rule_pack": mostly(
            st.sampled_from(["arithmetic", "ad_selection"]), st.one_of(st.sampled_from(RULE_PACKS), text(20))
        ),
        None: st.none(),
    }[kind]
    fields = {"id": draw(text(20)), "soft": draw(st.booleans()), "failure_message": draw(text(30))}
    if kind is not None:
        fields[kind] = draw(source)
    return fields, draw(params)


def add_constraints(request, drawn: list[tuple[dict, dict]]) -> None:
    for fields, parameters in drawn:
        added = request.constraints.add(**fields)
        added.params.update(parameters)


constraints = mostly(st.lists(constraint(), max_size=3), st.lists(constraint(), min_size=31, max_size=34))

# --- drafts ---------------------------------------------------------------------------------------------------

EQUATIONS = [
    "9" * 30 + " * " + "9" * 30 + " = " + "9" * 60,
    "9" * 31 + " + 1 = 1",
    "1" * 5000 + " = 1",
    "1/0 = 0",
    "0.1 + 0.2 = 0.3",
    "(" * 40 + "1" + ")" * 40 + " = 1",
    "1e308 * 1e308 = inf",
    "2^1000000 = 1",
    "<<48/2=24>>24",
    "\\frac{1}{0} = 1",
    "50% of 80 = 40",
    "10**100 = 1",
    "= = = = 1",
]
draft_pieces = st.one_of(
    text(80),
    st.sampled_from(EQUATIONS),
    st.builds(lambda v: json.dumps(v, ensure_ascii=False), json_values),
    st.builds(json.dumps, deep_values),
    st.sampled_from(["[" * 100_000, "{" * 50_000, '{"a": NaN}', '{"a": 1e999}', "```json\n{\n```", "null"]),
    st.builds(lambda n: json.dumps({"ids": [1] * n}), st.sampled_from([0, 5, 5000])),
    # JSON escapes of half a surrogate pair ("\ud83d"): valid JSON, but no valid text.
    st.builds(
        json.dumps, st.dictionaries(st.text(SURROGATES, max_size=3), st.text(SURROGATES, max_size=3), max_size=2)
    ),
    st.builds(lambda n: json.dumps("a" * n + "!"), st.integers(10, 40)),  # food for `^(a+)+$`
    st.builds(lambda n: json.dumps({"a" * n + "!": 1}), st.integers(10, 40)),  # … and for patternProperties
    st.builds(lambda n: f"Final answer: {'9' * n}", st.integers(1, 5000)),
)
draft_texts = mostly(st.lists(draft_pieces, max_size=4).map("\n".join), around(1_000_000))


@st.composite
def draft(draw) -> common_pb2.Draft:
    return common_pb2.Draft(
        id=draw(text(20)),
        index=draw(int32),
        strategy=draw(text(20)),
        text=draw(draft_texts),
        finish_reason=draw(st.sampled_from([0, 1, 2, 3, 99, -5])),  # open enum: unknown values arrive too
    )


# --- requests -------------------------------------------------------------------------------------------------

output_schemas = mostly(st.sampled_from(["", VALID_SCHEMA]), schema_texts)
prompts = mostly(st.text(characters, min_size=1, max_size=60).filter(str.strip), field_text(60, 8000))
drafts = mostly(st.lists(draft(), min_size=1, max_size=4), st.lists(draft(), max_size=17))


@st.composite
def verify_drafts_requests(draw) -> verifier_service_pb2.VerifyDraftsRequest:
    request = verifier_service_pb2.VerifyDraftsRequest(
        request_id=draw(text(20)),
        prompt=draw(prompts),
        drafts=draw(drafts),
        output_schema=draw(output_schemas),
    )
    add_constraints(request, draw(constraints))
    request.context.update(draw(contexts))
    return request


@st.composite
def check_constraints_requests(draw) -> verifier_service_pb2.CheckConstraintsRequest:
    request = verifier_service_pb2.CheckConstraintsRequest(output_schema=draw(output_schemas))
    add_constraints(request, draw(constraints))
    request.context.update(draw(contexts))
    return request


@st.composite
def solve_requests(draw) -> scheduler_service_pb2.SolveRequest:
    request = scheduler_service_pb2.SolveRequest(
        prompt=draw(prompts),
        output_schema=draw(output_schemas),
        num_drafts=draw(mostly(st.integers(0, 8), int32)),
        strategy_hints=draw(mostly(st.lists(text(20), max_size=3), st.lists(field_text(20, 500), max_size=9))),
        request_id=draw(mostly(text(20), around(128))),
        selection_policy=draw(mostly(st.sampled_from(["", "weighted", "best_of", "majority"]), text(20))),
        disable_thinking_trace=draw(st.booleans()),
        disable_consensus_prefix=draw(st.booleans()),
        disable_default_arithmetic=draw(st.booleans()),
    )
    add_constraints(request, draw(constraints))
    request.context.update(draw(contexts))
    for name in ("sampling", "refine_sampling"):
        if draw(st.booleans()):
            getattr(request, name).CopyFrom(draw(sampling()))
    return request
