"""Hostile programs the program check must refuse (tests and bench/program_check.py): each with what its
failure message must say. Kept beside the check so the tests and the benchmark run one set."""

from __future__ import annotations

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
