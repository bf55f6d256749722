"""Fan-out cost: N drafts in one batched generation vs a single draft, same new tokens per draft.

    python bench/fanout.py [--tokens 64] [--drafts 5]

Loads the embedded engine once, warms it up, then times 1 prompt and N prompts (one strategy hint
each, as the Drafter builds them) with min_new_tokens = max_new_tokens = T, so both sides decode
exactly T tokens per sequence with the same sampling parameters. Each side runs 3 times; the
medians and their ratio go to bench/results/fanout.json.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from common import write_result

from deliberate.drafter.prompts import SYSTEM_PROMPT, draft_user_message, strategies_for
from deliberate.engines import SamplingParams, load_engine

QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?"
)
REPEATS = 3


def timed_generate(engine, prompts: list[str], params: SamplingParams) -> float:
    started = time.perf_counter()
    completions = engine.generate(prompts, params, lambda event: None, threading.Event())
    elapsed = time.perf_counter() - started
    # Equal work on both sides is the point of the comparison: check it rather than assume it.
    assert all(c.completion_tokens == params.max_new_tokens for c in completions), completions
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per sequence")
    parser.add_argument("--drafts", type=int, default=5, help="prompts in the batched generation")
    args = parser.parse_args()

    started = time.perf_counter()
    engine = load_engine("transformers")
    load_s = time.perf_counter() - started
    prompts = [
        engine.format_chat(SYSTEM_PROMPT, draft_user_message(QUESTION, strategy, None))
        for strategy in strategies_for(args.drafts, [])
    ]
    params = SamplingParams(max_new_tokens=args.tokens, min_new_tokens=args.tokens, seed=0)

    warm_up = SamplingParams(max_new_tokens=8, min_new_tokens=8, seed=0)
    timed_generate(engine, prompts[:1], warm_up)
    timed_generate(engine, prompts, warm_up)

    single, batch = [], []
    for _ in range(REPEATS):  # interleaved, so drift in machine load hits both sides alike
        single.append(timed_generate(engine, prompts[:1], params))
        batch.append(timed_generate(engine, prompts, params))
    single_s, batch_s = statistics.median(single), statistics.median(batch)

    figures = {
        "ratio": round(batch_s / single_s, 3),
        "single_s": round(single_s, 3),
        "batch_s": round(batch_s, 3),
        "drafts": args.drafts,
        "tokens": args.tokens,
        "single_runs_s": [round(s, 3) for s in single],
        "batch_runs_s": [round(s, 3) for s in batch],
        "single_tokens_per_s": round(args.tokens / single_s, 1),
        "batch_tokens_per_s": round(args.drafts * args.tokens / batch_s, 1),
        "load_s": round(load_s, 1),
    }
    path = write_result("fanout", figures)
    print(
        f"1 x {args.tokens} tokens: {single_s:.2f} s   "
        f"{args.drafts} x {args.tokens} tokens: {batch_s:.2f} s   "
        f"ratio {figures['ratio']:.2f}   ({figures['single_tokens_per_s']} tok/s single, "
        f"{figures['batch_tokens_per_s']} tok/s total batched; median of {REPEATS})"
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
