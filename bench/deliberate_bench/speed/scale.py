"""Scale-out: the same requests against 1 Drafter and against 2 Drafter replicas, one engine thread each.

    deliberate bench scale [--requests 10] [--drafts 4] [--tokens 64] [--model smollm2-135m]

For each of "1 drafter" and "2 drafters" (in that order, one after the other on this machine): starts the stack on
free ports with DELIBERATE_ENGINE_THREADS=1 for every Drafter (the Refiner keeps the machine's default, as under
`deliberate up --drafters 2`: it runs while the Drafters wait), the Scheduler pointed at every
Drafter (docs/deploy.md#load-balancing) and sampling their load every second, solves one warm-up question, then the
same `--requests` GSM8K questions one after the other: `--drafts` drafts of at most `--tokens` tokens each, fixed
seeds, no quorum and no default arithmetic pack (so no draft is stopped early and both sides generate the same
work), 8 refined tokens. Writes bench/studies/speed/scale.json:

- `wall_ratio`: the 2-replica run's wall time for the requests over the 1-replica run's (lower is better);
- `draft_ratio`: the same for the summed draft stage (`SolveResponse.timings.draft`);
- `replica_shares`: each replica's share of the drafts in the 2-replica run (the Scheduler's
  `deliberate_replica_drafts_total{outcome="generated"}`), a list in replica order;
- per run: wall and per-request seconds, drafts and completion tokens, and the load average before and after
  (other processes on the machine slow both runs, not necessarily alike).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from deliberate.cli.stack import Ports, Stack
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.inputs import add_data_argument, load_questions
from deliberate_bench.results import write_result
from deliberate_client.client import DeliberateClient, build_request

REFINE_TOKENS = 8


def replica_drafts(stack: Stack) -> dict[str, float]:
    """The Scheduler's drafts generated per replica (host:port)."""
    with urllib.request.urlopen(stack.metrics_url("scheduler"), timeout=5) as response:
        text = response.read().decode()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "deliberate_replica_drafts_total" and sample.labels.get("outcome") == "generated":
                counts[sample.labels["replica"]] = counts.get(sample.labels["replica"], 0.0) + sample.value
    return counts


def request_for(question: str, seed: int, args: argparse.Namespace) -> pb.SolveRequest:
    request = build_request(
        question, num_drafts=args.drafts, max_new_tokens=args.tokens, refine_max_new_tokens=REFINE_TOKENS,
        seed=seed, disable_default_arithmetic=True,
    )  # fmt: skip
    request.disable_quorum = True  # every draft runs to its end (streaming verification stays: the round spreads)
    request.confidence_stop = False
    return request


def measure(drafters: int, questions: list[str], args: argparse.Namespace) -> dict:
    log_dir = Path(tempfile.mkdtemp(prefix=f"deliberate-scale-{drafters}-"))
    stack = Stack(
        ports=Ports.free(),
        env={"DELIBERATE_MODEL": args.model},
        drafter_env={"DELIBERATE_ENGINE_THREADS": "1"},
        log_dir=log_dir,
        state_dir=log_dir,
        drafters=drafters,
        with_gateway=False,
        scheduler_args=["--max-redrafts", "0", "--load-interval-s", "1", "--default-deadline-s", "600"],
    )
    with stack:
        with DeliberateClient(stack.address) as client:
            client.solve(request_for(questions[0], 0, args), timeout=600)  # warm-up: prompt caches, first calls
            time.sleep(2.0)  # a load sample after the warm-up: every replica is ready and idle
            before = replica_drafts(stack)
            load_before = os.getloadavg()[0]
            seconds, draft_s, refine_s, tokens, drafts = [], [], [], 0, 0
            started = time.perf_counter()
            for i, question in enumerate(questions[1:], start=1):
                sent = time.perf_counter()
                response = client.solve(request_for(question, 1000 * i, args), timeout=600)
                seconds.append(time.perf_counter() - sent)
                draft_s.append(response.timings.draft.ToTimedelta().total_seconds())
                refine_s.append(response.timings.refine.ToTimedelta().total_seconds())
                tokens += sum(report.draft.usage.completion_tokens for report in response.drafts)
                drafts += len(response.drafts)
                print(
                    f"  {drafters} drafter(s) request {i}: {seconds[-1]:.1f} s, draft {draft_s[-1]:.1f} s, "
                    f"refine {refine_s[-1]:.1f} s",
                    flush=True,
                )
            wall = time.perf_counter() - started
            load_after = os.getloadavg()[0]
            after = replica_drafts(stack)
        per_replica = [after.get(stack.address_of(r), 0.0) - before.get(stack.address_of(r), 0.0)
                       for r in stack.drafter_replicas]  # fmt: skip
    total = sum(per_replica)
    return {
        "drafters": drafters,
        "wall_s": round(wall, 2),
        "draft_s": round(sum(draft_s), 2),
        "refine_s": round(sum(refine_s), 2),
        "request_s": [round(s, 2) for s in seconds],
        "median_request_s": round(statistics.median(seconds), 2),
        "drafts": drafts,
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens / wall, 1),
        "replica_drafts": per_replica,
        "replica_shares": [round(n / total, 3) if total else 0.0 for n in per_replica],
        "load_average_before": round(load_before, 2),
        "load_average_after": round(load_after, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--drafts", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--model", default="smollm2-135m")
    add_data_argument(parser)
    args = parser.parse_args(argv)
    questions = load_questions(args.data, args.requests + 1)

    runs = []
    for drafters in (1, 2):
        print(f"{drafters} drafter(s), {args.requests} requests of {args.drafts} x {args.tokens} tokens …", flush=True)
        runs.append(measure(drafters, questions, args))
    one, two = runs
    figures = {
        "model": args.model,
        "requests": args.requests,
        "drafts": args.drafts,
        "tokens": args.tokens,
        "drafter_engine_threads": 1,
        "wall_ratio": round(two["wall_s"] / one["wall_s"], 3),
        "draft_ratio": round(two["draft_s"] / one["draft_s"], 3),
        "replica_shares": two["replica_shares"],
        "runs": runs,
    }
    print(
        f"1 drafter: {one['wall_s']:.1f} s   2 drafters: {two['wall_s']:.1f} s   wall_ratio {figures['wall_ratio']}   "
        f"draft_ratio {figures['draft_ratio']}   replica_shares {figures['replica_shares']}"
    )
    print(f"wrote {write_result('scale', figures)}")


if __name__ == "__main__":
    main()
