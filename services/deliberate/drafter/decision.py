"""Decision programs: a program draft for a request with an output schema (a plan over the request's data).

The model writes the method and the Verifier's sandbox does the arithmetic over the rows: the request's data is
bound there as the variable `ctx` (the same object the Drafter receives in `GenerateDraftsRequest.context`), and
the program prints the JSON plan last. The prompt describes the data's shape — keys, sizes, a few example rows —
never all of it. For a selection problem the program may state the question's rules as the arguments of an exact
engine, `best_rows` (the model writes the formulation, the solver computes: LLM-Modulo, OptiMUS), or compute a plan
itself (the seed's strategies: a plan that fits, swaps for a higher value).
"""

from __future__ import annotations

import json
import keyword
import re

from ..core.convert import field_names, in_reading_order, is_table
from ..decisions.prompts import DecisionPrompt

# Strategy hints of decision programs, one per draft, cycling. The first three formulate the question for the
# exact engine, `best_rows` (`verifier.decision_program.SolverCalls`), as the worked example does, each stressing
# what the recorded programs got wrong (a cap on the wrong field, the one-per rule inverted, ids read from dicts as
# keys); the last computes a plan by itself, for a question the engine does not fit.
# "The field the question maximizes", not "value": a small model reads a word in a hint as a key of the rows.
DECISION_STRATEGIES = (
    "Do as the example does: one call of best_rows with the field the question maximizes, the numbers read from "
    "ctx and the data's own field names; print the ids of the rows it returns.",
    "Call best_rows once, as the example does: at_most maps the field whose total the question limits (a cost, a "
    "weight) to its limit read from ctx; one_per is the field that may not repeat (None when repeats are allowed).",
    'As in the example, plan = best_rows(...); the rows it returns are dicts, so the answer lists row["id"] for '
    "each row of the plan.",
    "Start from a plan that fits every rule (the cheapest rows), then swap a row for one with a higher value of "
    "the field the question maximizes while the plan still fits.",
)

# One worked example on a made-up problem (boxes, not any request's domain): a small model copies the pattern —
# read `ctx`, state the rules as best_rows's arguments, print the JSON — far better than it follows a description.
DECISION_EXAMPLE = """Example. Question: pick 2 boxes with the highest total value; total weight at most 10; \
no two boxes of one color; only boxes whose id is allowed. The data: ctx["boxes"], a list of dicts; \
ctx["allowed"], a list of ids; ctx["limit"] = 10; ctx["count"] = 2; ctx["one_per_color"] = True.
```python
import json

boxes = ctx["boxes"]  # a list of 8 dicts; each dict has the keys id, color, value, weight
allowed = ctx["allowed"]  # a list of 6 ints
count = ctx["count"]  # 2
limit = ctx["limit"]  # 10
one_per_color = ctx["one_per_color"]  # True

# the boxes of highest total value: exactly `count`, total weight at most `limit`, at most one box of a color
plan = best_rows(
    [b for b in boxes if b["id"] in allowed],  # rows: the dicts that may be chosen
    maximize="value",
    count=count,
    at_most={"weight": limit},
    one_per="color" if one_per_color else None,
)
answer = {"box_ids": [b["id"] for b in plan]}
print(json.dumps(answer))
```"""

# The exact engine, as the program sees it (the Verifier's sandbox defines it; `decisions.solver.best_rows` solves).
BEST_ROWS_HELP = (
    "`best_rows(rows, maximize, count=None, at_most=None, one_per=None)` is already defined: from `rows`, the list "
    "of dicts that may be chosen, it returns the list of rows with the highest total of the field `maximize`, "
    "exactly `count` of them, the total of each field in `at_most` (a dict: field -> limit) at most its limit, "
    "and at most one row for each value of the field `one_per`. It raises ValueError when no choice fits. "
    'Other rules a question may state, as keyword arguments: minimize="field" in place of maximize (the least '
    "total); count=[low, high] for a range, count=None for as many as fit; at_least={field: floor} for a floor on a "
    "total; most_per={field: k} for at most k rows per value; least_of={field: {value: k}} for at least k rows of "
    "that value; include={field: [values]} for rows that must be chosen; exclude={field: [values]} for rows that "
    "may not. A rule on one row alone (each cost at most 500) filters `rows` first."
)

DECISION_RULES = (
    "You make business decisions by writing a short Python program. The request's data is already loaded in the "
    "variable `ctx` (a dict): read every number from it; never assign `ctx` and never type data in. Plain "
    "Python; `import json` is the only import. Use the variables the program starts with and the field names "
    "of the data. Check each rule of the question in code. `answer` is one JSON object (a dict), and the last line "
    "is print(json.dumps(answer)).\n"
)
DECISION_SYSTEM_PROMPT = DECISION_RULES + BEST_ROWS_HELP + "\n\n" + DECISION_EXAMPLE


def decision_system_prompt(pack_prompt: DecisionPrompt | None = None) -> str:
    """The exact engine's help and example; a rule pack's own functions' (the credit pack's risk model) where the
    request names a pack that gives its programs some."""
    if pack_prompt is None:
        return DECISION_SYSTEM_PROMPT
    return DECISION_RULES + pack_prompt.help + "\n\n" + pack_prompt.example


DECISION_ENDING = (
    "Write only the program, in one ```python block, without defining ctx. `answer` looks like {skeleton}{sizes}. "
    "End with print(json.dumps(answer))."
)
# The opened fence, the import the last line needs and the data's main table read from `ctx` (`decision_prefill`):
# the model continues inside a program that already reads the request's data.
DECISION_PREFILL = "```python\nimport json\n\n"

# How the prompt shows the data: a few rows of each list, values of a few scalars, nesting to this depth.
MAX_DESCRIPTION_CHARS = 1500
MAX_DEPTH = 3
MAX_SHOWN_TEXT = 40  # a text scalar's value shown beside its variable up to this length
MAX_PREFILL_NAMES = 8  # top-level entries of `ctx` the program's opening reads into variables
# A run of at least this many table-like lines in the question is data the program reads from `ctx` instead.
MIN_DATA_RUN = 6
DATA_LINE = re.compile(r"^\s*\S+(?:[\s|,;]+\S+){1,12}\s*$")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def decision_user_message(question: str, data: dict, strategy: str, schema: dict | None, feedback: str = "") -> str:
    parts = [
        without_data_rows(question.strip()),
        "The data is in the variable `ctx`, already defined (do not define it):\n" + describe_data(data),
        f"Approach: {strategy}",
    ]
    if feedback.strip():
        parts.append(f"Avoid these problems of earlier attempts: {feedback.strip()}")
    sizes = list_sizes(schema or {})
    parts.append(DECISION_ENDING.format(skeleton=skeleton(schema or {}), sizes=f", with {sizes}" if sizes else ""))
    return "\n\n".join(parts)


def list_sizes(schema: dict) -> str:
    """How many items the answer's top-level lists hold where the schema says: ``exactly 3 items in "offers"``,
    ``3 to 5 items in "items"`` (recorded: a program copied the worked example's count of offers, the size stated
    by the schema alone)."""
    sizes = []
    for name, field in schema.get("properties", {}).items() if isinstance(schema, dict) else ():
        low, high = (field.get(k) if isinstance(field, dict) else None for k in ("minItems", "maxItems"))
        if not isinstance(low, int) or not isinstance(high, int):
            continue
        count = f"exactly {low}" if low == high else f"{low} to {high}"
        sizes.append(f"{count} items in {json.dumps(name)}")
    return " and ".join(sizes)


def skeleton(schema: dict, depth: int = 0) -> str:
    """The answer's shape from its JSON schema, as a small model reads it: ``{"selected_ids": [<int>, ...]}`` (a
    schema pasted whole is often printed back instead of an answer)."""
    if depth > MAX_DEPTH or not isinstance(schema, dict):
        return "<value>"
    if "enum" in schema and schema["enum"]:
        return json.dumps(schema["enum"][0])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        fields = ", ".join(
            f"{json.dumps(k)}: {skeleton(v, depth + 1)}" for k, v in schema.get("properties", {}).items()
        )
        return "{" + fields + "}"
    if kind == "array":
        item = skeleton(schema.get("items", {}), depth + 1)
        return f"[{item}, ...]"
    return {"integer": "<int>", "number": "<number>", "string": "<text>", "boolean": "<true or false>"}.get(
        kind if isinstance(kind, str) else "", "<value>"
    )


def decision_prefill(data: dict) -> str:
    """DECISION_PREFILL, then each of `data`'s top-level entries read into a variable of its name, with what it
    holds, e.g. ``catalog = ctx["catalog"]  # a list of 100 dicts; each dict has the keys id, category, cost, ctr``,
    a scalar's value (``picks = ctx["picks"]  # 5``), in a fixed order (`in_reading_order`): the program starts
    from the request's data, not data it makes up, and from the data's own field names. (A table's rows by id,
    once given here against `catalog[id]`, led programs calling `best_rows` to look its returned rows up as ids.)"""
    lines = []
    for key, value in in_reading_order(data)[:MAX_PREFILL_NAMES]:
        if not key.isidentifier() or key == "ctx" or keyword.iskeyword(key):
            continue
        line = f"{key} = ctx[{json.dumps(key)}]"
        if is_table(value):
            fields = field_names(value)
            line += f"  # a list of {len(value)} dicts; each dict has the keys {', '.join(fields)}"
        elif isinstance(value, list) and value:
            line += f"  # a list of {len(value)} {type_name(value[0])}s"
        elif isinstance(value, dict) and value:
            line += f"  # keys: {', '.join(map(str, value))}"
        elif isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= MAX_SHOWN_TEXT):
            line += f"  # {value!r}"  # a rule's number is one the program reads, and can see
        lines.append(line)
    return DECISION_PREFILL + "".join(f"{line}\n" for line in lines)


def decision_strategies_for(
    count: int, round_: int = 0, start: int = 0, strategies: tuple[str, ...] = DECISION_STRATEGIES
) -> list[str]:
    """`count` decision hints from the round's `start`-th program on; a re-draft round starts further along."""
    offset = start + round_ * max(count, 1)
    return [strategies[(offset + i) % len(strategies)] for i in range(count)]


def describe_data(data: dict) -> str:
    """`ctx`'s shape as lines a small model can code against, e.g.
    ``ctx["catalog"]: a list of 100 dicts, each {"id": <int>, "category": <str>, "cost": <int>, "ctr": <float>}``
    (keys and types, never rows). Bounded by MAX_DESCRIPTION_CHARS."""
    if not data:
        return "ctx = {} (the request carries no data)"
    lines = []
    for key, value in in_reading_order(data):
        lines += describe_value(f"ctx[{json.dumps(key)}]", value, depth=1)
    text = "\n".join(lines)
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 1] + "…"


def describe_value(path: str, value: object, depth: int) -> list[str]:
    if isinstance(value, dict):
        small = json.dumps(value)
        if len(small) <= 200 or depth >= MAX_DEPTH:
            return [f"{path} = {shortened(small)}"]
        lines = [f"{path}: a dict with keys {', '.join(map(str, value))}"]
        for key, item in value.items():
            lines += describe_value(f"{path}[{json.dumps(key)}]", item, depth + 1)
        return lines
    if isinstance(value, list):
        if not value:
            return [f"{path} = []"]
        if is_table(value):
            # Keys and types, no rows: a small model copies rows it is shown into its program as data of its own.
            keys = field_names(value)
            typed = ", ".join(f"{json.dumps(k)}: <{type_name(value[0].get(k))}>" for k in keys)
            return [f"{path}: a list of {len(value)} dicts, each {{{typed}}}"]
        return [f"{path}: a list of {len(value)} {type_name(value[0])}s"]
    return [f"{path} = {json.dumps(value)}"]


def type_name(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(type(value), "value")


def shortened(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def without_data_rows(question: str) -> str:
    """The question with each long run of table rows (the data `ctx` holds) replaced by one line saying so: the
    program reads the rows, and the prompt stays short."""
    lines = question.splitlines()
    kept: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= MIN_DATA_RUN:
            kept.append(f"[{len(run)} data lines omitted: the program reads the same data from `ctx`]")
        else:
            kept.extend(run)
        run.clear()

    for line in lines:
        if DATA_LINE.match(line) and len(NUMBER.findall(line)) >= 2 and len(line) <= 160:
            run.append(line)
        else:
            flush()
            kept.append(line)
    flush()
    return "\n".join(kept)
