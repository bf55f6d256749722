"""Resident memory of the llama.cpp engine over distinct prompts, with and without llama.cpp's host-RAM
prompt cache.

    deliberate bench prompt-cache-memory [--prompts 12] [--model smollm2-135m]

Each side runs in a process of its own (RSS is per process): it loads the engine, then generates 3 drafts of
4 tokens for each of N distinct ~60-word prompts, and reports VmRSS before and after. deliberate runs with the
cache off (`host_prompt_cache_mib=0`); 8192 is llama.cpp's default. Results:
bench/studies/speed/prompt_cache_memory.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import threading

from deliberate_bench.results import write_result

SIDES = {"off (deliberate)": 0, "on (llama.cpp default)": 8192}


def rss_mb() -> int:
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS")).split()[1]) // 1024


def measure(model: str, prompts: int, cache_mib: int, results) -> None:
    from deliberate.engines import SamplingParams
    from deliberate.engines.llamacpp_engine import LlamaCppEngine

    engine = LlamaCppEngine.load(model, host_prompt_cache_mib=cache_mib)
    params = SamplingParams(max_new_tokens=4, min_new_tokens=4)
    before = rss_mb()
    for i in range(prompts):
        question = f"Question {i}: " + " ".join(f"word{i}_{j}" for j in range(60))
        engine.generate([engine.format_chat("Answer.", question)] * 3, params, lambda event: None, threading.Event())
    results.put({"rss_before_mb": before, "rss_after_mb": rss_mb(), "growth_mb": rss_mb() - before})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args(argv)
    context = multiprocessing.get_context("spawn")
    figures = {"model": args.model, "prompts": args.prompts, "sides": {}}
    for name, cache_mib in SIDES.items():  # one after the other: two llama.cpp processes would fight for cores
        results = context.Queue()
        process = context.Process(target=measure, args=(args.model, args.prompts, cache_mib, results))
        process.start()
        figures["sides"][name] = {"host_prompt_cache_mib": cache_mib, **results.get()}
        process.join()
        print(f"prompt cache {name:24} RSS +{figures['sides'][name]['growth_mb']} MB over {args.prompts} prompts")
    print(f"wrote {write_result('prompt_cache_memory', figures)}")


if __name__ == "__main__":
    main()
