"""What token confidence costs: decoding speed of the default engine (llama.cpp) with and without the top-k
log-probabilities per token (`--confidence-top-k`), measured side by side in one run — the same prompt, 5 sequences
decoded together as a round of drafts is, a fixed number of tokens (EOS ignored), the two settings alternated.

    deliberate bench confidence-cost        # prints the ratio, writes bench/studies/speed/confidence_cost.json

The cost is llama.cpp's: with `logprobs` it takes a softmax and sorts the whole vocabulary (151k tokens for the
default model) for every token of every sequence; k itself hardly matters.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from deliberate.engines.base import SamplingParams
from deliberate.engines.llamacpp_engine import LlamaCppEngine
from deliberate_bench.results import write_result

PROMPT = "Tom has 3 boxes of 12 apples, eats 5 and gives a third of the rest away. How many apples does he keep?"


def tokens_per_second(engine: LlamaCppEngine, top_k: int, sequences: int, tokens: int, seed: int) -> float:
    params = SamplingParams(
        temperature=0.7, max_new_tokens=tokens, min_new_tokens=tokens, seed=seed, top_logprobs=top_k
    )
    prompt = engine.format_chat("Solve the problem step by step.", PROMPT)
    started = time.perf_counter()
    completions = engine.generate([prompt] * sequences, params, lambda event: None, threading.Event())
    return sum(c.completion_tokens for c in completions) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--sequences", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args(argv)
    engine = LlamaCppEngine.load(args.model, parallel=args.sequences)
    tokens_per_second(engine, 0, args.sequences, 8, seed=0)  # warm-up: the prompt is in the cache for both
    speeds: dict[int, list[float]] = {0: [], args.top_k: []}
    for repeat in range(args.repeats):
        order = (0, args.top_k) if repeat % 2 == 0 else (args.top_k, 0)  # neither always runs first
        for top_k in order:
            speeds[top_k].append(tokens_per_second(engine, top_k, args.sequences, args.tokens, seed=100 * repeat))
    without, with_ = statistics.fmean(speeds[0]), statistics.fmean(speeds[args.top_k])
    result = {
        "model": args.model,
        "top_k": args.top_k,
        "sequences": args.sequences,
        "tokens_per_sequence": args.tokens,
        "repeats": args.repeats,
        "tokens_per_second_without": round(without, 2),
        "tokens_per_second_with": round(with_, 2),
        "speed_ratio": round(with_ / without, 3),
        "runs": {str(k): [round(v, 2) for v in values] for k, values in speeds.items()},
    }
    print(json.dumps(result, indent=2))
    write_result("confidence_cost", result)


if __name__ == "__main__":
    main()
