"""Hostile programs the program check must refuse (tests and `deliberate bench program-check`): each with what its
failure message must say. Kept beside the check so the tests and the benchmark run one set."""

from __future__ import annotations

from .decision_program import DECISION_LIMITS, SOLVER_LIMITS
from .program import LIMITS

MEMORY_REFUSAL = "MiB of memory"
TIME_REFUSAL = f"exceeded {LIMITS.time_s:g} s"

HOSTILE_PROGRAMS: dict[str, tuple[str, str]] = {
    "infinite_loop": ("while True:\n    pass\n", TIME_REFUSAL),
    "memory_bomb": ("x = [0] * (10**9)\nprint(len(x))\n", MEMORY_REFUSAL),
    "doubling_string": ("s = 'a'\nwhile True:\n    s = s + s\n", MEMORY_REFUSAL),
    "deep_recursion": ("def f(n):\n    return f(n + 1)\n\nprint(f(0))\n", "RecursionError at line 2"),
    "fork_bomb": ("import os\nwhile True:\n    os.fork()\n", "AttributeError at line 3"),
    "import_os_system": ("import os\nos.system('id')\nprint(1)\n", "AttributeError at line 2"),
    "import_subprocess": ("import subprocess\nprint(subprocess.run(['id']))\n", "ModuleNotFoundError at line 1"),
    "import_socket": ("import socket\nsocket.create_connection(('1.1.1.1', 80))\n", "ModuleNotFoundError at line 1"),
    "import_ctypes": ("import ctypes\nctypes.CDLL(None).system(b'id')\n", "ModuleNotFoundError at line 1"),
    "open_passwd": ("print(open('/etc/passwd').read())\n", "PermissionError at line 1"),
    "dunder_import": ("__import__('os').system('id')\nprint(1)\n", "NameError at line 1"),
    "subclasses_walk": (
        "for c in ().__class__.__bases__[0].__subclasses__():\n    print(c)\nprint(1)\n",
        "AttributeError at line 1",
    ),
    "eval_built_string": ("eval('__imp' + 'ort__(\"os\")').system('id')\nprint(1)\n", "at line 1"),
    "exec_built_string": ("exec('import ' + 'subpro' + 'cess')\nprint(1)\n", "ModuleNotFoundError"),
    "ten_mb_output": ("for i in range(200_000):\n    print('x' * 50)\n", "printed more than 64 KiB"),
    "ten_mb_line": ("print('x' * 10_000_000)\n", "printed more than 64 KiB"),
    "one_mb_program": ("x = 1\n" * 160_000 + "print(x)\n", "the limit is 16,000"),
    "sleep": ("import time\ntime.sleep(30)\nprint(1 / 0)\n", "ZeroDivisionError at line 3"),
}


def refused_as_expected(name: str, message: str) -> bool:
    """Whether `message` refuses hostile program `name` as its entry says. A memory bomb may instead meet the time
    limit on a loaded machine, before it has allocated its way to the memory limit: that is a refusal too."""
    expected = HOSTILE_PROGRAMS[name][1]
    return expected in message or (expected == MEMORY_REFUSAL and TIME_REFUSAL in message)


def as_draft(code: str) -> str:
    """A program draft around `code`, as the Drafter writes one."""
    return f"Let me compute it.\n```python\n{code}```\n"


# Hostile decision programs (a structured request's program, `ctx` bound to the request's data) the Verifier must
# refuse, each with what the verdict's messages must say; run on `DECISION_DATA` against `DECISION_CHECKS`
# (tests/unit/verifier/test_decision_programs.py, tests/integration/test_program_check.py).
DECISION_DATA = {
    "catalog": [
        {"id": i, "cost": 400 + 20 * (37 * i % 60), "ctr": round(0.01 + 0.001 * i, 4), "category": f"c{i % 7}"}
        for i in range(1, 121)
    ],
    "pool": list(range(1, 121)),
    "budget": 3600,
}
DECISION_HOSTILE_PROGRAMS: dict[str, tuple[str, str]] = {
    "reads_outside_ctx": ("print(open('/etc/passwd').read())\n", "PermissionError at line 2"),
    "assigns_ctx": (
        'ctx = {"catalog": [{"id": 1, "cost": 0}]}\nprint(json.dumps({"selected_ids": [1, 2]}))\n',
        "line 2 assigns ctx",
    ),
    # Its own copy changes; the rules read the request's: the true total cost is over the budget.
    "mutates_ctx": (
        'top = sorted(ctx["catalog"], key=lambda a: -a["cost"])[:3]\nfor ad in ctx["catalog"]:\n    ad["cost"] = 0\n'
        'print(json.dumps({"selected_ids": [ad["id"] for ad in top]}))\n',
        "budget_check failed: total cost 4,720 is 1,120 over the budget 3,600",
    ),
    "huge_output": ('for ad in ctx["catalog"]:\n    print(json.dumps(ctx) * 3)\n', "printed more than 64 KiB"),
    "long_loop_over_the_data": (
        'best = []\nfor a in ctx["catalog"]:\n    for b in ctx["catalog"]:\n        for c in ctx["catalog"]:\n'
        '            best.append(a["id"] + b["id"] + c["id"])\nprint(json.dumps({"selected_ids": best[:3]}))\n',
        f"exceeded {DECISION_LIMITS.time_s:g} s",
    ),
    "another_requests_data": ("print(json.dumps({'selected_ids': leaked_ids}))\n", "NameError at line 2"),
    # The exact engine is bounded: calls per run, rows per call, and only a list of dicts with numbers.
    "solver_replaced_by_a_stub": (
        "def best_rows(rows, maximize, count=None, at_most=None, one_per=None):\n    return rows[:3]\n"
        'print(json.dumps({"selected_ids": [a["id"] for a in best_rows(ctx["catalog"], "ctr")]}))\n',
        "line 2 defines best_rows; it is already defined: call it",
    ),
    "solver_called_in_a_loop": (
        'for i in range(1000):\n    best_rows(ctx["catalog"], "ctr", 3)\nprint(1)\n',
        f"best_rows was called more than {SOLVER_LIMITS.calls} times",
    ),
    "solver_given_a_huge_table": (
        'rows = [{"id": i, "ctr": i} for i in range(5_000)]\nprint(best_rows(rows, "ctr", 3))\n',
        f"the limit is {SOLVER_LIMITS.rows:,}",
    ),
    "solver_given_ids_for_rows": (
        'print(best_rows(ctx["pool"], "ctr", 3))\n',
        'rows must be a list of dicts such as ctx["catalog"], not a list of ints',
    ),
    "solver_given_text_to_maximize": (
        'print(best_rows([{"id": 1, "ctr": "__import__"}], "ctr", 1))\n',
        "is '__import__', not a number",
    ),
}


# An ordinary decision program for DECISION_DATA: greedy by ctr per cost under the budget, one ad per category.
DECISION_GREEDY = (
    'ranked = sorted(ctx["catalog"], key=lambda a: a["ctr"] / a["cost"], reverse=True)\n'
    "chosen, cost, seen = [], 0, set()\n"
    "for a in ranked:\n"
    '    if len(chosen) < 3 and cost + a["cost"] <= ctx["budget"] and a["category"] not in seen:\n'
    '        chosen.append(a["id"])\n        cost += a["cost"]\n        seen.add(a["category"])\n'
    'print(json.dumps({"selected_ids": chosen}))\n'
)


def as_decision_draft(code: str) -> str:
    """A decision program draft around `code`, as the Drafter writes one (its opening imports json)."""
    return f"```python\nimport json\n{code}```\n"
