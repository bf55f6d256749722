"""Helpers shared by the benchmarks: where results go and what machine produced them."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
# The runs defaults are chosen on: the tuning blocks (make eval-tuning, eval-tuning-2, eval-tuning-3), never scored.
TUNING_RUNS = tuple(RESULTS / f"eval-tuning{block}.runs.jsonl" for block in ("", "-2", "-3"))


def machine() -> dict:
    facts = {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # other work on the machine while measuring
        **cpu_model(),
        "reference_workload_ms": reference_workload_ms(),
    }
    try:  # torch is the optional `transformers` extra
        import torch
    except ImportError:
        return facts
    return {**facts, "torch_threads": torch.get_num_threads(), "torch": torch.__version__}


def cpu_model() -> dict:
    """The CPU's model name and clock as /proc/cpuinfo gives them (Linux; empty elsewhere)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    return {"cpu_model": fields.get("model name", ""), "cpu_mhz": fields.get("cpu MHz", "")}


def reference_workload_ms() -> float:
    """Milliseconds one core takes for a fixed pure-Python workload (dicts, strings, a sort), best of 5: the same
    Verifier code ran 2.6 times faster on one 2-core machine than on the one before it, so figures from two machines
    compare only through this."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        table = {f"key{n}": n * 7 % 1000 for n in range(20_000)}
        sorted(table.items(), key=lambda item: (item[1], item[0]))
        best = min(best, time.perf_counter() - started)
    return round(best * 1e3, 2)


QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?"
)


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


def read_runs_by_id(path: Path) -> dict[str, dict]:
    """A resumable benchmark's per-problem records (one JSON object a line), by problem id; {} before the first."""
    if not path.exists():
        return {}
    return {record["id"]: record for record in map(json.loads, path.read_text().splitlines()) if record}


def write_result(name: str, figures: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        **figures,
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


ROOT = Path(__file__).resolve().parents[1]
SHARED_GSM8K = ROOT.parent / "shared/data/gsm8k/train.jsonl"
SAMPLE_GSM8K = ROOT / "tests/data/gsm8k_sample.jsonl"


def add_data_argument(parser) -> None:
    """`--data`: any JSONL file shaped like GSM8K (a "question" per line); the shared split by default."""
    default = SHARED_GSM8K if SHARED_GSM8K.exists() else SAMPLE_GSM8K
    parser.add_argument("--data", type=Path, default=default, help=f"JSONL questions (default: {default})")


def load_questions(path: Path, count: int) -> list[str]:
    with path.open() as lines:
        return [json.loads(line)["question"] for _, line in zip(range(count), lines, strict=False)]
