"""End-to-end latency of one solve through the four service processes, split by stage.

    deliberate bench e2e [--drafts 5] [--tokens 128] [--runs 1]

Starts the stack on free ports, solves one warm-up question, then measures `--runs` solves of a GSM8K
question (5 drafts, 128 new tokens per draft and for the refined answer) and writes
bench/studies/speed/e2e.json with `latency_s` (median) and `stages` (median seconds per stage).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from deliberate.cli.stack import Ports, Stack
from deliberate_bench.inputs import add_data_argument, load_questions
from deliberate_bench.results import write_result
from deliberate_client.client import DeliberateClient, build_request

STAGES = ("draft", "verify", "select", "refine", "total")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drafts", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=1)
    add_data_argument(parser)
    args = parser.parse_args(argv)

    questions = load_questions(args.data, args.runs + 1)

    log_dir = Path(tempfile.mkdtemp(prefix="deliberate-bench-"))
    with Stack(ports=Ports.free(), log_dir=log_dir) as stack, DeliberateClient(stack.address) as client:
        client.solve(
            build_request("What is 2 + 3?", num_drafts=args.drafts, max_new_tokens=16, refine_max_new_tokens=16)
        )
        latencies, stages = [], {s: [] for s in STAGES}
        for question in questions[1 : args.runs + 1] or questions[:1]:
            request = build_request(
                question,
                num_drafts=args.drafts,
                max_new_tokens=args.tokens,
                refine_max_new_tokens=args.tokens,
                seed=1,
            )
            started = time.perf_counter()
            response = client.solve(request, timeout=600)
            latencies.append(time.perf_counter() - started)
            for s in STAGES:
                stages[s].append(getattr(response.timings, s).ToTimedelta().total_seconds())
            tokens = [r.draft.usage.completion_tokens for r in response.drafts]
            print(f"solve: {latencies[-1]:.2f}s, draft tokens {tokens}, status {response.status}")

    figures = {
        "latency_s": round(statistics.median(latencies), 3),
        "stages": {s: round(statistics.median(v), 3) for s, v in stages.items()},
        "drafts": args.drafts,
        "tokens": args.tokens,
        "runs": len(latencies),
    }
    print(json.dumps(figures, indent=2))
    print(f"wrote {write_result('e2e', figures)}")


if __name__ == "__main__":
    main()
