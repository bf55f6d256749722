"""Latency of the program check (verifier/program.py) per program: p50/p99 ms over the hostile set and over 50
ordinary GSM8K-style programs, each run through the whole check (finding the block, the sandbox, reading the
answer) in this process's warm pool, one at a time. Then every program draft recorded in the 200-problem
evaluation, run under the current limits and under the former 0.5 s time limit: how long they take and how many
outcomes the shorter limit changes (evidence that it costs ordinary programs nothing).

    deliberate bench program-check        # prints the table, writes bench/studies/speed/program_check.json
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

from deliberate.verifier.hostile_programs import HOSTILE_PROGRAMS, as_draft
from deliberate.verifier.program import LIMITS, ProgramLimits, check_program
from deliberate_bench.results import LAB_FILES, read_runs

RESULT = LAB_FILES / "program_check.json"
RECORDED = LAB_FILES / "eval-gsm8k-200.runs.jsonl"
FORMER_LIMITS = ProgramLimits(time_s=0.5)  # the time limit before 40 ms
ROUNDS = 3  # each program this many times


def ordinary_programs(count: int = 50) -> list[tuple[str, str]]:
    """(program, its answer): the shapes a model writes for GSM8K: a few assignments, arithmetic, a loop, print."""
    programs = []
    for i in range(count):
        a, b, c = 12 + i, 3 + i % 7, 2 + i % 5
        shape = i % 5
        if shape == 0:
            code, answer = f"eggs = {a}\neaten = {b}\nprice = {c}\nprint((eggs - eaten) * price)\n", (a - b) * c
        elif shape == 1:
            code = f"total = 0\nfor day in range({b}):\n    total += {a} * {c}\nprint(total)\n"
            answer = a * c * b
        elif shape == 2:
            code = f"cost = {a} * {c}\ndiscount = cost * {b} / 100\nprint(cost - discount)\n"
            answer = a * c - a * c * b / 100
        elif shape == 3:
            code = f"def per_week(n):\n    return n * 7\n\nhours = per_week({c})\nprint(hours + {a})\n"
            answer = c * 7 + a
        else:
            code = f"import math\nboxes = math.ceil({a} / {c})\nprint(f'{{boxes}} boxes')\n"
            answer = -(-a // c)
        programs.append((code, answer))
    return programs


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(drafts: list[str]) -> list[float]:
    times = []
    for _ in range(ROUNDS):
        for draft in drafts:
            started = time.perf_counter()
            check_program(draft)
            times.append((time.perf_counter() - started) * 1000)
    return times


def summary(times: list[float]) -> dict:
    return {
        "programs_timed": len(times),
        "p50_ms": round(percentile(times, 0.5), 2),
        "p99_ms": round(percentile(times, 0.99), 2),
        "max_ms": round(max(times), 2),
        "mean_ms": round(statistics.fmean(times), 2),
    }


def recorded_programs(path: Path = RECORDED) -> list[str]:
    """The text of every program draft the evaluation recorded (its single program pass is one of them)."""
    return [draft["text"] for run in read_runs(path) for draft in run["solve"]["drafts"] if draft["kind"] == "program"]


def against_former_limit(drafts: list[str]) -> dict:
    """The recorded programs under the current limits (timed) and under the former 0.5 s: outcomes that differ."""
    times, changed, passed = [], 0, 0
    for draft in drafts:
        started = time.perf_counter()
        now = check_program(draft)
        times.append((time.perf_counter() - started) * 1000)
        before = check_program(draft, FORMER_LIMITS)
        passed += bool(now and now.passed)
        changed += (now and (now.passed, now.answer)) != (before and (before.passed, before.answer))
    return {"source": RECORDED.name, **summary(times), "passed": passed, "outcome_differs_from_0.5_s": changed}


def main(argv: list[str] | None = None) -> None:
    ordinary = ordinary_programs()
    check_program(as_draft("print(1)\n"))  # the pool starts
    wrong = [code for code, answer in ordinary if check_program(as_draft(code)).answer is None]
    assert not wrong, wrong
    hostile = {name: as_draft(code) for name, (code, _) in HOSTILE_PROGRAMS.items()}
    per_program = {name: round(statistics.median(measure([draft])), 2) for name, draft in hostile.items()}
    hostile_times = measure(list(hostile.values()))
    without_loop = measure([draft for name, draft in hostile.items() if name != "infinite_loop"])
    result = {
        "command": "deliberate bench program-check",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "limits": {
            "time_s": LIMITS.time_s,
            "memory_mib": LIMITS.memory_bytes // 2**20,
            "recursion_depth": LIMITS.recursion_depth,
            "output_kib": LIMITS.output_bytes // 1024,
            "program_chars": LIMITS.program_chars,
        },
        "ordinary": summary(measure([as_draft(code) for code, _ in ordinary])),
        "hostile": summary(hostile_times),
        "hostile_without_infinite_loop": summary(without_loop),
        "hostile_median_ms_by_program": per_program,
        "recorded": against_former_limit(recorded_programs()) if RECORDED.exists() else None,
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"program check, ms per program ({result['machine']}; limits {result['limits']})")
    for name in ("ordinary", "hostile", "hostile_without_infinite_loop"):
        row = result[name]
        print(f"  {name:30} n={row['programs_timed']:4}  p50 {row['p50_ms']:8.2f}  p99 {row['p99_ms']:8.2f}")
    for name, ms in per_program.items():
        print(f"    {name:28} {ms:8.2f}")
    if recorded := result["recorded"]:
        print(
            f"  recorded programs ({recorded['source']}): n={recorded['programs_timed']}  p50 {recorded['p50_ms']:.2f}"
            f"  p99 {recorded['p99_ms']:.2f}  max {recorded['max_ms']:.2f}  passed {recorded['passed']}"
            f"  outcome differs from the 0.5 s limit: {recorded['outcome_differs_from_0.5_s']}"
        )
    print(f"wrote {RESULT}")


if __name__ == "__main__":
    main()
