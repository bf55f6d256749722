"""What the consensus prefix buys a streaming caller: `SolveStream` with the prefix (`final_text` consensus prefix)
against without (`final_text` refine), side by side on the same problems, request and seed (`make bench-stream-prefix`).

    deliberate bench stream-prefix [--limit 12] [--drafts 5] [--max-new-tokens 256] [--runs FILE]

One local stack (the services' defaults; each request says its way to the final text). Each GSM8K problem (a fixed
sample of --data) is streamed twice, the order alternating from problem to problem. For each side it records the time to
first content — the first answer text a caller can show: the `consensus_prefix` event or the first `refine_chunk`,
whichever comes first —, the time to the final answer, the refinement's tokens and whether the answer is right. Each
problem's pair is appended to the runs file as it finishes (resumable; `--limit 2` is a quick profile). Writes
bench/studies/refinement/stream_prefix.json: `first_content_ratio` and `total_ratio` (with ÷ without, medians over the
problems where the prefix was found, and over all), `refine_token_ratio`, `prefix_share`, the accuracies.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from deliberate.cli.stack import Ports, Stack
from deliberate.selection import same_answer
from deliberate.verifier.parsing import extract_final_answer
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.eval.problems import load_problems
from deliberate_bench.inputs import add_data_argument
from deliberate_bench.results import LAB_FILES, append_run, read_runs_by_id, write_result
from deliberate_client.client import DeliberateClient, build_request

SEED = 1
SIDES = ("with", "without")


def stream_once(client: DeliberateClient, problem, args, prefix: bool) -> dict:
    """One streamed solve; times are seconds from the call."""
    request = build_request(problem.question, num_drafts=args.drafts, seed=SEED, max_new_tokens=args.max_new_tokens)
    request.final_text = pb.FINAL_TEXT_CONSENSUS_PREFIX if prefix else pb.FINAL_TEXT_REFINE
    started = time.perf_counter()
    prefix_s = first_chunk_s = None
    final = None
    for event in client.solve_stream(request, timeout=args.timeout):
        kind = event.WhichOneof("event")
        if kind == "consensus_prefix" and prefix_s is None:
            prefix_s = time.perf_counter() - started
        elif kind == "refine_chunk" and first_chunk_s is None:
            first_chunk_s = time.perf_counter() - started
        elif kind == "final":
            final = event.final
    total_s = time.perf_counter() - started
    answer = final.answer
    draft_tokens = sum(d.draft.usage.completion_tokens for d in final.drafts)
    return {
        "first_content_s": round(min(s for s in (prefix_s, first_chunk_s, total_s) if s is not None), 3),
        "prefix_s": prefix_s and round(prefix_s, 3),
        "first_chunk_s": first_chunk_s and round(first_chunk_s, 3),
        "total_s": round(total_s, 3),
        "refine_tokens": final.usage.completion_tokens - draft_tokens,
        "had_prefix": bool(final.consensus_prefix),
        "good": same_answer(extract_final_answer(answer), problem.gold),
        "status": final.status,
    }


def median(records: list[dict], side: str, key: str) -> float:
    return round(statistics.median(r[side][key] for r in records), 2)


def ratio_of_medians(records: list[dict], key: str) -> float | None:
    return round(median(records, "with", key) / median(records, "without", key), 3) if records else None


def figures(records: list[dict]) -> dict:
    with_prefix = [r for r in records if r["with"]["had_prefix"]]
    tokens = {side: sum(r[side]["refine_tokens"] for r in records) for side in SIDES}
    return {
        "n": len(records),
        "prefix_share": round(len(with_prefix) / len(records), 3),
        "first_content_ratio": ratio_of_medians(records, "first_content_s"),
        "total_ratio": ratio_of_medians(records, "total_s"),
        "first_content_ratio_where_prefix": ratio_of_medians(with_prefix, "first_content_s"),
        "total_ratio_where_prefix": ratio_of_medians(with_prefix, "total_s"),
        "median_first_content_s": {side: median(records, side, "first_content_s") for side in SIDES},
        "median_total_s": {side: median(records, side, "total_s") for side in SIDES},
        "refine_token_ratio": round(tokens["with"] / tokens["without"], 3) if tokens["without"] else None,
        "refine_tokens": tokens,
        "accuracy_with": round(100 * sum(r["with"]["good"] for r in records) / len(records), 1),
        "accuracy_without": round(100 * sum(r["without"]["good"] for r in records) / len(records), 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=12, help="GSM8K questions (default 12)")
    parser.add_argument("--drafts", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=256, help="draft budget")
    parser.add_argument("--timeout", type=float, default=900.0, help="deadline of each solve, seconds")
    parser.add_argument("--runs", type=Path, default=LAB_FILES / "stream_prefix.runs.jsonl")
    add_data_argument(parser)
    args = parser.parse_args(argv)

    chosen = load_problems(args.data, args.limit, SEED, set())
    done = read_runs_by_id(args.runs)
    todo = [p for p in chosen if p.id not in done]
    if todo:
        with Stack(ports=Ports.free()) as stack, DeliberateClient(stack.address) as client:
            for problem in todo:
                order = (True, False) if len(done) % 2 == 0 else (False, True)
                sides = {prefix: stream_once(client, problem, args, prefix) for prefix in order}
                record = {"id": problem.id, "with": sides[True], "without": sides[False]}
                append_run(args.runs, record)
                done[problem.id] = record
                print(
                    f"{problem.id}: first content {sides[True]['first_content_s']:.1f}s/"
                    f"{sides[False]['first_content_s']:.1f}s, total {sides[True]['total_s']:.1f}s/"
                    f"{sides[False]['total_s']:.1f}s, prefix {sides[True]['had_prefix']}",
                    flush=True,
                )
    records = [done[p.id] for p in chosen if p.id in done]
    path = write_result(
        "stream_prefix", {**figures(records), "drafts": args.drafts, "max_new_tokens": args.max_new_tokens}
    )
    print(path.read_text())


if __name__ == "__main__":
    main()
