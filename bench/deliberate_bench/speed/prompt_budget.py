"""How long the default model's drafts are, and whether asking for brevity costs accuracy.

Runs one greedy draft per GSM8K problem for each draft prompt below, side by side in one engine call,
on the tuning problems (train.jsonl lines 0..N-1, which `deliberate bench eval` excludes). Prints, per prompt,
the share of drafts that end within 320 and within the budget, mean tokens and accuracy; writes
prompt-budget.json (no study keeps it).

    deliberate bench prompt-budget [--problems 12] [--budget 640]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from fractions import Fraction

from deliberate.drafter import prompts
from deliberate.engines import SamplingParams, load_engine
from deliberate.selection.numbers import extract_number
from deliberate.verifier.parsing import extract_final_answer
from deliberate_bench.inputs import SHARED_GSM8K as GSM8K
from deliberate_bench.results import LAB_FILES

# The old draft prompt (before this measurement) and the brief one that replaced it.
VERBOSE_SYSTEM = "You are a careful problem solver. Show your reasoning, then state the result."
VERBOSE_ENDING = "End with a last line of the form 'Final answer: <answer>'."
VARIANTS = {
    "verbose": (VERBOSE_SYSTEM, VERBOSE_ENDING),
    "brief": (prompts.SYSTEM_PROMPT, prompts.FREE_TEXT_ENDING),
}
STRATEGY = prompts.DEFAULT_STRATEGIES[0]


def gold(answer: str) -> Fraction:
    return Fraction(answer.rsplit("####", 1)[1].strip().replace(",", ""))


def correct(text: str, expected: Fraction) -> bool:
    answer = extract_final_answer(text)
    value = extract_number(answer) if answer else None
    return value is not None and Fraction(value) == expected


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=12)
    parser.add_argument("--budget", type=int, default=640)
    args = parser.parse_args(argv)
    engine_name = os.environ.get("DELIBERATE_ENGINE", "llamacpp")
    model = os.environ.get("DELIBERATE_MODEL", "embedded")
    engine = load_engine(engine_name, model)
    with GSM8K.open() as lines:
        problems = [json.loads(line) for _, line in zip(range(args.problems), lines, strict=False)]
    rows = {name: [] for name in VARIANTS}
    greedy = SamplingParams(temperature=0.0, max_new_tokens=args.budget)
    started = time.perf_counter()
    for number, problem in enumerate(problems):
        chats = [
            engine.format_chat(system, "\n\n".join([problem["question"], f"Approach: {STRATEGY}", ending]))
            for system, ending in VARIANTS.values()
        ]
        completions = engine.generate(chats, greedy, lambda event: None, threading.Event())
        for name, completion in zip(VARIANTS, completions, strict=True):
            rows[name].append(
                {
                    "tokens": completion.completion_tokens,
                    "stopped": completion.finish_reason == "stop",
                    "correct": correct(completion.text, gold(problem["answer"])),
                }
            )
        print(f"[{number + 1}/{len(problems)}] {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    summary = {
        name: {
            "ends_within_320": sum(r["stopped"] and r["tokens"] <= 320 for r in got) / len(got),
            "ends_within_budget": sum(r["stopped"] for r in got) / len(got),
            "mean_tokens": sum(r["tokens"] for r in got) / len(got),
            "accuracy": sum(r["correct"] for r in got) / len(got),
        }
        for name, got in rows.items()
    }
    result = {
        "engine": engine_name,
        "model": model,
        "problems": len(problems),
        "problem_lines": f"train.jsonl 0..{len(problems) - 1}",
        "budget": args.budget,
        "variants": {name: {"system": s, "ending": e} for name, (s, e) in VARIANTS.items()},
        "summary": summary,
        "rows": rows,
    }
    out = LAB_FILES / "prompt-budget.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
