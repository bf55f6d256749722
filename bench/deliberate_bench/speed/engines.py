"""The Drafter over gRPC against xllamacpp called directly: how much of llama.cpp's throughput the service keeps.

    deliberate bench engines [--model embedded] [--drafts 5] [--tokens 128] [--threads 0] [--out engines]
                            [--with-transformers]

One side is a real Drafter process (`python -m deliberate.drafter` on free ports, llama.cpp engine) asked for N
drafts with GenerateDrafts. The other builds llama.cpp's server with xllamacpp as the llamacpp engine builds it (the
same slots, context per slot, unified KV cache and threads) and sends it what that engine sends: one streaming
completion request per sequence, each from its own thread, with no deliberate engine code in between. Both get the
Drafter's own prompts for N drafts (rendered with the model's chat template; the prompt token counts are checked
equal) and the same sampling: temperature, top_p, penalties, seed + i for sequence i, and the top-k log-probabilities
the Drafter asks for its token confidence. GenerateDrafts has no minimum length, so a draft may stop before T tokens:
the direct side then decodes, per sequence, exactly the tokens the Drafter's draft had (n_predict, EOS ignored). The
two sides run one after the other, REPEATS times, interleaved so drift in machine load hits both alike.
`throughput_ratio` = the Drafter's median tokens/s ÷ direct xllamacpp's (target >= 0.9); with each side's runs and
the load average before and after, it goes to <out>.json in its study's folder.

`--with-transformers` adds the retired comparison of the llamacpp and transformers engines (same GGUF, prompts and
token counts, each engine in a process of its own; information only, no target) under `transformers_comparison`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from deliberate.cli.stack import Ports, Stack
from deliberate.drafter.settings import DrafterSettings
from deliberate.engines import SamplingParams, load_engine
from deliberate.engines.base import cpu_count
from deliberate.engines.llamacpp_engine import DEFAULT_CONTEXT_PER_SLOT, DEFAULT_PARALLEL
from deliberate.engines.models import gguf_file
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_bench.inputs import QUESTION, draft_prompts, timed_generate
from deliberate_bench.results import write_result

REPEATS = 3
WARM_UP_TOKENS = 8
SAMPLING_FIELDS = ("temperature", "top_p", "max_new_tokens", "presence_penalty", "frequency_penalty")
# The Drafter's default: the log-probabilities its drafts' token confidence is computed from (~4 % of speed).
CONFIDENCE_TOP_K = DrafterSettings.model_fields["confidence_top_k"].default


@dataclass(frozen=True)
class Run:
    """One generation of N sequences: each sequence's new and prompt tokens, and the wall seconds for all."""

    tokens: list[int]
    prompt_tokens: list[int]
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return sum(self.tokens) / self.seconds


def summarize(drafter: list[Run], direct: list[Run]) -> dict:
    """Each side's median tokens/s and seconds, its runs, and `throughput_ratio` (Drafter ÷ direct medians)."""
    figures = {}
    for side, runs in (("drafter", drafter), ("direct", direct)):
        figures[f"{side}_tokens_per_s"] = round(statistics.median(run.tokens_per_s for run in runs), 1)
        figures[f"{side}_s"] = round(statistics.median(run.seconds for run in runs), 3)
        figures[f"{side}_runs_tokens_per_s"] = [round(run.tokens_per_s, 1) for run in runs]
        figures[f"{side}_runs_tokens"] = [sum(run.tokens) for run in runs]
    ratio = statistics.median(run.tokens_per_s for run in drafter) / statistics.median(r.tokens_per_s for r in direct)
    return {"throughput_ratio": round(ratio, 3), **figures}


def sampling_message(sampling: SamplingParams, seed: int) -> common_pb2.SamplingParams:
    """`sampling` as GenerateDrafts takes it (the fields its message has), with `seed`."""
    return common_pb2.SamplingParams(seed=seed, **{name: getattr(sampling, name) for name in SAMPLING_FIELDS})


def drafter_run(stub, drafts: int, sampling: SamplingParams, seed: int) -> Run:
    """Seconds from the GenerateDrafts call to its last draft, and the drafts' tokens in draft order."""
    request = drafter_service_pb2.GenerateDraftsRequest(
        request_id=f"bench-engines-{seed}",
        prompt=QUESTION,
        num_drafts=drafts,
        sampling=sampling_message(sampling, seed),
    )
    started = time.perf_counter()
    replies = list(stub.GenerateDrafts(request, timeout=1800))
    seconds = time.perf_counter() - started
    usages = [reply.draft.usage for reply in sorted(replies, key=lambda reply: reply.draft.index)]
    return Run([u.completion_tokens for u in usages], [u.prompt_tokens for u in usages], seconds)


class DirectLlamaCpp:
    """llama.cpp's server core through xllamacpp, built and asked as the llamacpp engine does it."""

    def __init__(self, model: str, threads: int) -> None:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(gguf_file(model))
        params.n_parallel = DEFAULT_PARALLEL
        params.kv_unified = True
        params.cache_ram_mib = 0
        params.n_ctx = DEFAULT_PARALLEL * DEFAULT_CONTEXT_PER_SLOT
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
        params.verbosity = -1
        params.warmup = False
        params.n_threads_http = 1
        self.server = xllamacpp.Server(params)

    def format_chat(self, system: str, user: str) -> str:
        """The prompt as llama.cpp's own rendering of the model's chat template gives it."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        reply = self.server.handle_chat_completions({"messages": messages, "max_tokens": 1, "verbose": True})
        return reply["__verbose"]["prompt"]

    def run(self, prompts: list[str], sampling: SamplingParams, seed: int, tokens: list[int], top_k: int) -> Run:
        """Sequence i decodes exactly tokens[i] new tokens, seeded seed + i; the wall seconds for all of them."""

        def complete(index: int) -> dict:
            request = {
                "prompt": prompts[index],
                "n_predict": tokens[index],
                "ignore_eos": True,
                "temperature": sampling.temperature,
                "top_p": sampling.top_p,
                "top_k": 0,
                "min_p": 0.0,
                "presence_penalty": sampling.presence_penalty,
                "frequency_penalty": sampling.frequency_penalty,
                "repeat_penalty": 1.0,
                "cache_prompt": True,
                "stream": True,
                "seed": seed + index,
            }
            if top_k > 0:
                request["logprobs"] = top_k
            usage = {}

            def on_chunk(chunk: dict) -> bool:
                usage.update(chunk.get("usage") or {})
                return False

            self.server.handle_completions(request, on_chunk)
            return usage

        started = time.perf_counter()
        with ThreadPoolExecutor(len(prompts)) as pool:
            usages = list(pool.map(complete, range(len(prompts))))
        seconds = time.perf_counter() - started
        run = Run([u["completion_tokens"] for u in usages], [u["prompt_tokens"] for u in usages], seconds)
        assert run.tokens == tokens, (run.tokens, tokens)
        return run


def drafter_stack(model: str, threads: int) -> Stack:
    """A stack of which only the Drafter is started, on the llamacpp engine, with the given model and threads."""
    log_dir = Path(tempfile.mkdtemp(prefix="deliberate-bench-engines-"))
    env = {
        "DELIBERATE_ENGINE": "llamacpp",
        "DELIBERATE_MODEL": model,
        "DELIBERATE_ENGINE_THREADS": str(threads),
        "DELIBERATE_CONFIDENCE_TOP_K": str(CONFIDENCE_TOP_K),
    }
    return Stack(ports=Ports.free(), log_dir=log_dir, state_dir=log_dir, env=env)


def compare_drafter_and_direct(model: str, drafts: int, tokens: int, threads: int) -> dict:
    sampling = SamplingParams(max_new_tokens=tokens)  # the services' sampling defaults
    warm_up = SamplingParams(max_new_tokens=WARM_UP_TOKENS)
    stack = drafter_stack(model, threads)
    try:
        stack.start("drafter")
        stack.wait_healthy(600, services=("drafter",))
        direct = DirectLlamaCpp(model, threads)
        prompts = draft_prompts(direct, drafts)
        with stack.channel("drafter") as channel:
            stub = drafter_service_pb2_grpc.DrafterServiceStub(channel)
            # Warm-up: both sides evaluate the prompts once (then served from their KV caches alike).
            first = drafter_run(stub, drafts, warm_up, seed=0)
            direct.run(prompts, warm_up, 0, first.tokens, CONFIDENCE_TOP_K)
            drafter_runs, direct_runs = [], []
            for seed in range(1, REPEATS + 1):
                drafter_runs.append(drafter_run(stub, drafts, sampling, seed))
                direct_runs.append(direct.run(prompts, sampling, seed, drafter_runs[-1].tokens, CONFIDENCE_TOP_K))
                print(
                    f"repeat {seed}: Drafter {drafter_runs[-1].tokens_per_s:.1f} tok/s, "
                    f"direct xllamacpp {direct_runs[-1].tokens_per_s:.1f} tok/s",
                    flush=True,
                )
    finally:
        stack.down()
    assert drafter_runs[0].prompt_tokens == direct_runs[0].prompt_tokens, "both sides must see the same prompts"
    figures = summarize(drafter_runs, direct_runs)
    return {**figures, "parallel_slots": DEFAULT_PARALLEL, "top_logprobs": CONFIDENCE_TOP_K}


def serve_engine(name: str, model: str, drafts: int, tokens: int, commands) -> None:
    """Worker process of the transformers comparison: loads one engine, then answers each command with seconds."""
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


def compare_llamacpp_and_transformers(model: str, drafts: int, tokens: int) -> dict:
    """The retired engine comparison: each engine in a process of its own (in one process, torch's and llama.cpp's
    OpenMP thread pools spin against each other), N drafts and 1 of exactly T tokens (min = max new tokens)."""
    engines = ("transformers", "llamacpp")
    context = multiprocessing.get_context("spawn")
    workers, load_s, prompts = {}, {}, {}
    for name in engines:  # loaded one after the other, so neither load competes with the other
        ours, theirs = context.Pipe()
        process = context.Process(target=serve_engine, args=(name, model, drafts, tokens, theirs))
        process.start()
        load_s[name], prompts[name] = ours.recv()
        workers[name] = (process, ours)
    assert prompts["transformers"] == prompts["llamacpp"], "both engines must see the same prompt text"

    def timed(name: str, command: str) -> float:
        connection = workers[name][1]
        connection.send(command)
        return connection.recv()

    for name in engines:
        timed(name, "warm_up")
    runs = {name: [] for name in engines}
    single = {name: [] for name in engines}  # one sequence: where llama.cpp's lead is largest (docs/models.md)
    for _ in range(REPEATS):
        for name in engines:
            runs[name].append(timed(name, "run"))
            single[name].append(timed(name, "single"))
    for process, connection in workers.values():
        connection.send("stop")
        process.join()
    medians = {name: statistics.median(times) for name, times in runs.items()}
    single_medians = {name: statistics.median(times) for name, times in single.items()}
    return {
        "latency_ratio": round(medians["llamacpp"] / medians["transformers"], 3),
        "latency_ratio_one_sequence": round(single_medians["llamacpp"] / single_medians["transformers"], 3),
        **{f"{name}_s": round(medians[name], 3) for name in engines},
        **{f"{name}_runs_s": [round(t, 3) for t in runs[name]] for name in engines},
        **{f"{name}_tokens_per_s": round(drafts * tokens / medians[name], 1) for name in engines},
        **{f"{name}_one_sequence_s": round(single_medians[name], 3) for name in engines},
        **{f"{name}_load_s": round(load_s[name], 2) for name in engines},
    }


def load_average() -> list[float]:
    return [round(load, 2) for load in os.getloadavg()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--drafts", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per draft (at most)")
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads of both sides; 0 = every CPU")
    parser.add_argument("--out", default="engines", help="result name: <out>.json")
    parser.add_argument("--with-transformers", action="store_true", help="add the retired transformers comparison")
    args = parser.parse_args(argv)
    threads = args.threads or cpu_count()

    before = load_average()
    figures = compare_drafter_and_direct(args.model, args.drafts, args.tokens, threads)
    figures |= {"model": args.model, "drafts": args.drafts, "tokens": args.tokens, "threads": threads}
    if args.with_transformers:
        figures["transformers_comparison"] = compare_llamacpp_and_transformers(args.model, args.drafts, args.tokens)
    figures |= {"load_average_before": before, "load_average_after": load_average()}
    path = write_result(args.out, figures)
    print(
        f"{args.drafts} x {args.tokens} tokens on {args.model}: Drafter {figures['drafter_tokens_per_s']} tok/s, "
        f"direct xllamacpp {figures['direct_tokens_per_s']} tok/s, throughput_ratio {figures['throughput_ratio']:.3f} "
        f"(target >= 0.9); load average {before} -> {figures['load_average_after']}"
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
