"""llama.cpp against transformers on the same model file, prompts, draft count and token counts.

    python bench/engines.py [--tokens 64] [--drafts 5] [--model smollm2-135m]

Both engines load the same GGUF (transformers de-quantizes it to fp32; llama.cpp runs it as it is).
Each engine lives in a process of its own, as in a Drafter (in one process, torch's and llama.cpp's
OpenMP thread pools spin against each other and slow both). Each generates N drafts of exactly T tokens
(min = max new tokens) from the Drafter's prompts, 3 times, interleaved so drift in machine load hits
both alike, one engine busy at a time. `latency_ratio` = llamacpp median / transformers median (target
<= 0.35); `latency_ratio_one_sequence` the same for 1 of the prompts; results go to bench/results/engines.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

from common import draft_prompts, timed_generate, write_result

from deliberate.engines import SamplingParams, load_engine

ENGINES = ("transformers", "llamacpp")
REPEATS = 3


def serve_engine(name: str, model: str, drafts: int, tokens: int, commands) -> None:
    """Worker process: loads one engine, then answers each command with the seconds it took."""
    started = time.perf_counter()
    engine = load_engine(name, model)
    prompts = draft_prompts(engine, drafts)
    commands.send((time.perf_counter() - started, prompts))
    params = {
        "warm_up": SamplingParams(max_new_tokens=8, min_new_tokens=8, seed=0),
        "run": SamplingParams(max_new_tokens=tokens, min_new_tokens=tokens, seed=0),
    }
    while (command := commands.recv()) != "stop":
        batch = prompts[:1] if command == "single" else prompts
        commands.send(timed_generate(engine, batch, params["warm_up" if command == "warm_up" else "run"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per draft")
    parser.add_argument("--drafts", type=int, default=5)
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args()

    context = multiprocessing.get_context("spawn")
    workers, load_s, prompts = {}, {}, {}
    for name in ENGINES:  # loaded one after the other, so neither load competes with the other
        ours, theirs = context.Pipe()
        process = context.Process(target=serve_engine, args=(name, args.model, args.drafts, args.tokens, theirs))
        process.start()
        load_s[name], prompts[name] = ours.recv()
        load_s[name] = round(load_s[name], 2)
        workers[name] = (process, ours)
    assert prompts["transformers"] == prompts["llamacpp"], "both engines must see the same prompt text"

    def timed(name: str, command: str) -> float:
        connection = workers[name][1]
        connection.send(command)
        return connection.recv()

    for name in ENGINES:
        timed(name, "warm_up")
    runs = {name: [] for name in ENGINES}
    single = {name: [] for name in ENGINES}  # one sequence: where llama.cpp's lead is largest (docs/models.md)
    for _ in range(REPEATS):
        for name in ENGINES:
            runs[name].append(timed(name, "run"))
            single[name].append(timed(name, "single"))
    for process, connection in workers.values():
        connection.send("stop")
        process.join()
    medians = {name: statistics.median(times) for name, times in runs.items()}
    single_medians = {name: statistics.median(times) for name, times in single.items()}
    figures = {
        "latency_ratio": round(medians["llamacpp"] / medians["transformers"], 3),
        "latency_ratio_one_sequence": round(single_medians["llamacpp"] / single_medians["transformers"], 3),
        "model": args.model,
        "drafts": args.drafts,
        "tokens": args.tokens,
        **{f"{name}_s": round(medians[name], 3) for name in ENGINES},
        **{f"{name}_runs_s": [round(t, 3) for t in runs[name]] for name in ENGINES},
        **{f"{name}_tokens_per_s": round(args.drafts * args.tokens / medians[name], 1) for name in ENGINES},
        **{f"{name}_one_sequence_s": round(single_medians[name], 3) for name in ENGINES},
        **{f"{name}_load_s": load_s[name] for name in ENGINES},
    }
    path = write_result("engines", figures)
    print(
        f"{args.drafts} x {args.tokens} tokens on {args.model}: transformers {medians['transformers']:.2f} s, "
        f"llamacpp {medians['llamacpp']:.2f} s, latency_ratio {figures['latency_ratio']:.3f} (target <= 0.35); "
        f"one sequence: {single_medians['transformers']:.2f} s against {single_medians['llamacpp']:.2f} s, "
        f"ratio {figures['latency_ratio_one_sequence']:.3f}"
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
