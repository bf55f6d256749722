"""Fan-out cost: N drafts in one batched generation vs a single draft, same new tokens per draft,
for each engine and embedded model.

    deliberate bench fanout [--tokens 64] [--drafts 5] [--engines llamacpp,transformers]
                           [--models smollm2-135m,qwen2.5-coder-0.5b]

For each (engine, model): loads it, warms it up, then times 1 prompt and N prompts (one strategy hint
each, as the Drafter builds them) with min_new_tokens = max_new_tokens = T, so both sides decode exactly
T tokens per sequence with the same sampling parameters. Each side runs 3 times, interleaved; the
medians and their ratio go to bench/studies/speed/fanout.json, one entry per (engine, model).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from deliberate.engines import SamplingParams, load_engine
from deliberate_bench.inputs import draft_prompts, timed_generate
from deliberate_bench.results import write_result

REPEATS = 3


def measure(engine_name: str, model: str, drafts: int, tokens: int) -> dict:
    started = time.perf_counter()
    engine = load_engine(engine_name, model)
    load_s = time.perf_counter() - started
    prompts = draft_prompts(engine, drafts)
    params = SamplingParams(max_new_tokens=tokens, min_new_tokens=tokens, seed=0)
    warm_up = SamplingParams(max_new_tokens=8, min_new_tokens=8, seed=0)
    timed_generate(engine, prompts[:1], warm_up)
    timed_generate(engine, prompts, warm_up)

    single, batch = [], []
    for _ in range(REPEATS):  # interleaved, so drift in machine load hits both sides alike
        single.append(timed_generate(engine, prompts[:1], params))
        batch.append(timed_generate(engine, prompts, params))
    single_s, batch_s = statistics.median(single), statistics.median(batch)
    del engine
    gc.collect()
    return {
        "engine": engine_name,
        "model": model,
        "ratio": round(batch_s / single_s, 3),
        "single_s": round(single_s, 3),
        "batch_s": round(batch_s, 3),
        "single_runs_s": [round(s, 3) for s in single],
        "batch_runs_s": [round(s, 3) for s in batch],
        "single_tokens_per_s": round(tokens / single_s, 1),
        "batch_tokens_per_s": round(drafts * tokens / batch_s, 1),
        "load_s": round(load_s, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per sequence")
    parser.add_argument("--drafts", type=int, default=5, help="prompts in the batched generation")
    parser.add_argument("--engines", default="llamacpp,transformers")
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    args = parser.parse_args(argv)

    runs = []
    for engine_name in args.engines.split(","):
        for model in args.models.split(","):
            run = measure(engine_name, model, args.drafts, args.tokens)
            runs.append(run)
            print(
                f"{engine_name:12} {model:20} 1 x {args.tokens}: {run['single_s']:.2f} s   "
                f"{args.drafts} x {args.tokens}: {run['batch_s']:.2f} s   ratio {run['ratio']:.2f}   "
                f"({run['single_tokens_per_s']} tok/s single, {run['batch_tokens_per_s']} tok/s total batched)",
                flush=True,
            )
    path = write_result("fanout", {"drafts": args.drafts, "tokens": args.tokens, "runs": runs})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
