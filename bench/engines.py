"""llama.cpp against transformers on the same model file, prompts, draft count and token counts.

    python bench/engines.py [--tokens 64] [--drafts 5] [--model smollm2-135m]

Both engines load the same GGUF (transformers de-quantizes it to fp32; llama.cpp runs it as it is).
Each generates N drafts of exactly T tokens (min = max new tokens) from the Drafter's prompts, 3 times,
interleaved so drift in machine load hits both alike. `latency_ratio` = llamacpp median / transformers
median (target <= 0.35); results go to bench/results/engines.json.
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import draft_prompts, timed_generate, write_result

from deliberate.engines import SamplingParams, load_engine

ENGINES = ("transformers", "llamacpp")
REPEATS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per draft")
    parser.add_argument("--drafts", type=int, default=5)
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args()

    engines, load_s = {}, {}
    for name in ENGINES:
        started = time.perf_counter()
        engines[name] = load_engine(name, args.model)
        load_s[name] = round(time.perf_counter() - started, 2)
    prompts = {name: draft_prompts(engine, args.drafts) for name, engine in engines.items()}
    assert prompts["transformers"] == prompts["llamacpp"], "both engines must see the same prompt text"
    params = SamplingParams(max_new_tokens=args.tokens, min_new_tokens=args.tokens, seed=0)
    warm_up = SamplingParams(max_new_tokens=8, min_new_tokens=8, seed=0)
    for name, engine in engines.items():
        timed_generate(engine, prompts[name], warm_up)

    runs = {name: [] for name in ENGINES}
    for _ in range(REPEATS):
        for name, engine in engines.items():
            runs[name].append(timed_generate(engine, prompts[name], params))
    medians = {name: statistics.median(times) for name, times in runs.items()}
    figures = {
        "latency_ratio": round(medians["llamacpp"] / medians["transformers"], 3),
        "model": args.model,
        "drafts": args.drafts,
        "tokens": args.tokens,
        **{f"{name}_s": round(medians[name], 3) for name in ENGINES},
        **{f"{name}_runs_s": [round(t, 3) for t in runs[name]] for name in ENGINES},
        **{f"{name}_tokens_per_s": round(args.drafts * args.tokens / medians[name], 1) for name in ENGINES},
        **{f"{name}_load_s": load_s[name] for name in ENGINES},
    }
    path = write_result("engines", figures)
    print(
        f"{args.drafts} x {args.tokens} tokens on {args.model}: transformers {medians['transformers']:.2f} s, "
        f"llamacpp {medians['llamacpp']:.2f} s, latency_ratio {figures['latency_ratio']:.3f} (target <= 0.35)"
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
