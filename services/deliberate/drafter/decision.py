"""Decision programs: a program draft for a request with an output schema (a plan over the request's data).

The model writes the method and the Verifier's sandbox does the arithmetic over the rows: the request's data is
bound there as the variable `ctx` (the same object the Drafter receives in `GenerateDraftsRequest.context`), and
the program prints the JSON plan last. The prompt describes the data's shape — keys, sizes, a few example rows —
never all of it, and carries the strategies the seed names for selection problems (top by value, by value per
cost, greedy under the budget, try and check).
"""

from __future__ import annotations

import json
import re

# Strategy hints of decision programs, one per draft, cycling.
DECISION_STRATEGIES = (
    "Sort the items by their value, highest first, and add each one only if every rule still holds after adding it.",
    "Sort the items by value per unit of cost, highest first, and add each one only if every rule still holds.",
    "Write a function that checks every rule of the question, then build the plan greedily, keeping a step only "
    "when the function accepts the plan.",
    "Start from the best items, then swap out the worst one while a rule is broken; check every rule in code "
    "before printing.",
)

DECISION_SYSTEM_PROMPT = (
    "You make business decisions by writing a short Python program. The request's data is already loaded in the "
    "variable `ctx` (a dict): read every number from it and never type data in. Plain Python; `import json` is "
    "the only import. Check each rule of the question in code. The last line is print(json.dumps(answer))."
)
DECISION_ENDING = (
    "Write only the program, in one ```python block. It builds `answer`, one JSON object that follows this schema "
    "(the object, not the schema): {schema}\nEnd with print(json.dumps(answer))."
)
# The opened fence and the import the last line needs: the model continues inside the program.
DECISION_PREFILL = "```python\nimport json\n\n"

# How the prompt shows the data: a few rows of each list, values of a few scalars, nesting to this depth.
EXAMPLE_ROWS = 3
MAX_DESCRIPTION_CHARS = 1500
MAX_DEPTH = 3
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
    parts.append(DECISION_ENDING.format(schema=json.dumps(schema or {})))
    return "\n\n".join(parts)


def decision_strategies_for(count: int, round_: int = 0, start: int = 0) -> list[str]:
    """`count` decision hints from the round's `start`-th program on; a re-draft round starts further along."""
    offset = start + round_ * max(count, 1)
    return [DECISION_STRATEGIES[(offset + i) % len(DECISION_STRATEGIES)] for i in range(count)]


def describe_data(data: dict) -> str:
    """`ctx`'s shape as lines a small model can code against, e.g.
    ``ctx["catalog"]: a list of 100 dicts with keys id (int), cost (int), ctr (float), category (str); the first 3:``
    followed by those rows as JSON. Bounded by MAX_DESCRIPTION_CHARS."""
    if not data:
        return "ctx = {} (the request carries no data)"
    lines = []
    for key, value in data.items():
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
        if all(isinstance(row, dict) for row in value):
            keys = list(dict.fromkeys(k for row in value for k in row))
            typed = ", ".join(f"{k} ({type_name(value[0].get(k))})" for k in keys)
            examples = "\n".join(f"  {json.dumps(row)}" for row in value[:EXAMPLE_ROWS])
            return [f"{path}: a list of {len(value)} dicts with keys {typed}; the first {EXAMPLE_ROWS}:\n{examples}"]
        shown = json.dumps(value[:8])
        more = f" (the first 8 of {len(value)})" if len(value) > 8 else ""
        return [f"{path}: a list of {len(value)} {type_name(value[0])}s, e.g. {shown}{more}"]
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
