"""What the benchmarks send: GSM8K questions (the shared split, else the tests' sample) and the Drafter's prompts for
one of them; and the timing of one generation."""

from __future__ import annotations

import json
import time
from pathlib import Path

from deliberate_bench.results import ROOT

SHARED_GSM8K = ROOT.parent / "shared/data/gsm8k/train.jsonl"
SAMPLE_GSM8K = ROOT / "tests/data/gsm8k_sample.jsonl"

QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?"
)


def add_data_argument(parser) -> None:
    """`--data`: any JSONL file shaped like GSM8K (a "question" per line); the shared split by default."""
    default = SHARED_GSM8K if SHARED_GSM8K.exists() else SAMPLE_GSM8K
    parser.add_argument("--data", type=Path, default=default, help=f"JSONL questions (default: {default})")


def load_questions(path: Path, count: int) -> list[str]:
    with path.open() as lines:
        return [json.loads(line)["question"] for _, line in zip(range(count), lines, strict=False)]


def draft_prompts(engine, count: int, question: str = QUESTION) -> list[str]:
    """`count` draft prompts for `question`, one strategy hint each, as the Drafter builds them."""
    from deliberate.drafter.prompts import SYSTEM_PROMPT, draft_user_message, strategies_for

    return [
        engine.format_chat(SYSTEM_PROMPT, draft_user_message(question, strategy, None))
        for strategy in strategies_for(count, [])
    ]


def timed_generate(engine, prompts: list[str], params) -> float:
    """Seconds for one generation of exactly params.max_new_tokens tokens per prompt (checked, not assumed)."""
    import threading

    started = time.perf_counter()
    completions = engine.generate(prompts, params, lambda event: None, threading.Event())
    elapsed = time.perf_counter() - started
    assert all(c.completion_tokens == params.max_new_tokens for c in completions), completions
    return elapsed
