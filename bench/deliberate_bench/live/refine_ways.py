"""Three ways to the final text, measured on equal terms (issue 41; docs/refiner.md#three-ways-to-the-final-text):
(a) the best draft passed through, no Refiner call; (b) the Refiner writing a worked solution; (c) the Refiner
continuing the drafts' consensus prefix — on the same recorded drafts, each way streamed through `SolveStream` and
through the gateway's stream (`make refine-ways`).

    deliberate bench refine-ways [--drafts-from RUNS] [--limit 60] [--no-gateway] [--runs FILE]

Draft once, finish three ways. The drafts are the first rounds that `make refine-drafts` recorded (the default Drafter
on tuning problems, never the scored sample). Here the Drafter runs the `recorded` engine on them, the Verifier and the
Scheduler run as deployed but for one round without the quorum stop (so every recorded draft is verified whole and every
way selects from the same drafts), and the Refiner runs the default Refiner model. For each problem the three ways go in
an order that rotates from problem to problem, each once through gRPC and once through the gateway. Recorded per way:
the answer and whether it is right, the refine stage's tokens and latency, the time from the drafts' end (the last
`draft_verified`) to the first content (the first `refine_chunk` or `consensus_prefix`; through the gateway, the first
`delta.content`), whether the answer ends with a plain `Final answer:` line, and whether it changed the answer of a
draft whose plan was checked (`program`, `cross_check`). Each call's question opens with a label of its own (`LABELS`),
so no call finds its question already in the Refiner's prompt cache. Each problem is appended to the runs file as it
finishes (resumable; `--limit 2` is a quick profile). Writes bench/studies/refinement/refine.{json,md}; the default is
the cheapest way (refine tokens) whose accuracy is within `ALLOWANCE_POINTS` of the best (the rule fixed before the
run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from deliberate.cli.stack import Ports, Stack
from deliberate.core.requests import FINAL_TEXTS
from deliberate.drafter.prompts import PROGRAM, PROGRAM_PREFILL, draft_plans
from deliberate.engines.models import DEFAULT_REFINER_MODEL
from deliberate.selection import same_answer
from deliberate.selection.final_text import PLAIN_FINAL_LINE
from deliberate.verifier.parsing import extract_final_answer
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.results import LAB_FILES, append_run, read_runs, read_runs_by_id, write_result
from deliberate_client.client import DeliberateClient, build_request

WAYS = FINAL_TEXTS  # name → SolveRequest.final_text
ALLOWANCE_POINTS = 1.0  # the default: the cheapest way within this many points of the most accurate
# The consensus prefix's targets against `refine` (the seed: -37 % tokens, P99 1.8 -> 1.1 s): it may be the
# default only where it meets them.
PREFIX_MAX_TOKEN_RATIO, PREFIX_MAX_LATENCY_P95_RATIO, PREFIX_MIN_ACCURACY_CHANGE = 0.7, 0.75, -1.0
RULE = (
    f"the way with the fewest refine tokens whose accuracy is within {ALLOWANCE_POINTS:g} point of the best; "
    "the consensus prefix only if it also meets its targets"
)
# Each call's question opens with a label of its own: llama.cpp reuses a slot's KV for a prompt's longest cached
# prefix, so a second call on the same question would skip most of the refine prompt's processing. In production
# every question is new; the label keeps each measured call so (letters only: the Verifier reads the numbers).
LABELS = {("grpc", "pass_through"): "A", ("grpc", "refine"): "B", ("grpc", "prefix"): "C",
          ("gateway", "pass_through"): "D", ("gateway", "refine"): "E", ("gateway", "prefix"): "F"}  # fmt: skip
PLAN_CHECKS = ("program", "cross_check")  # a draft with these checked its plan: its answer may not change
SEED = 7


def recorded_rounds(path: Path, limit: int) -> list[dict]:
    """The first `limit` GSM8K problems of a runs file with their first round's drafts, each with the strategy
    hint the Drafter gave it (so the `recorded` engine finds it by its prompt)."""
    problems = []
    for record in read_runs(path):
        if record.get("task") != "gsm8k" or not record.get("solve", {}).get("drafts"):
            continue
        drafts = sorted((d for d in record["solve"]["drafts"] if d["round"] == 0), key=lambda d: d["index"])
        programs = sum(d.get("kind") == PROGRAM for d in drafts)
        plans = draft_plans(len(drafts), [], program_drafts=programs)
        if [plan.kind for plan in plans] != [d.get("kind", "prose") for d in drafts]:
            continue  # not the plan a default round makes: its prompts would not match
        problems.append({"id": record["id"], "question": record["question"], "gold": record["gold"],
                         "drafts": [(plan.strategy, d) for plan, d in zip(plans, drafts, strict=True)]})  # fmt: skip
        if len(problems) == limit:
            break
    return problems


def recording_lines(problems: list[dict]) -> str:
    """The `recorded` engine's JSONL: a program's text without the fence the Drafter prefills itself."""
    lines = []
    for problem in problems:
        for strategy, draft in problem["drafts"]:
            text = draft["text"].removeprefix(PROGRAM_PREFILL) if draft.get("kind") == PROGRAM else draft["text"]
            record = {"question": problem["question"], "strategy": strategy, "text": text}
            if draft.get("confidence"):
                record["confidence"] = draft["confidence"]
            lines.append(json.dumps(record) + "\n")
    return "".join(lines)


def labelled(question: str, channel: str, way: str) -> str:
    return f"Request {LABELS[channel, way]}. {question}"


def through_grpc(client: DeliberateClient, problem: dict, way: str, timeout: float) -> dict:
    question = labelled(problem["question"], "grpc", way)
    request = build_request(question, num_drafts=len(problem["drafts"]), seed=SEED)
    request.final_text = WAYS[way]
    request.disable_quorum = True
    started = time.perf_counter()
    drafts_end = first_content = None
    final = None
    for event in client.solve_stream(request, timeout=timeout):
        kind, now = event.WhichOneof("event"), time.perf_counter() - started
        if kind == "draft_verified":
            drafts_end = now
        elif kind in ("refine_chunk", "consensus_prefix") and first_content is None:
            first_content = now
        elif kind == "final":
            final = event.final
    return outcome(final, problem["gold"]) | {
        "first_content_after_drafts_s": round(first_content - drafts_end, 3),
        "total_s": round(time.perf_counter() - started, 3),
    }


def outcome(final: pb.SolveResponse, gold: str) -> dict:
    """What one way made of the drafts, read from the final response."""
    best = next(r for r in final.drafts if r.draft.id == final.selected_draft_ids[0])
    stated = extract_final_answer(final.answer)
    lines = [line for line in final.answer.strip().splitlines() if line.strip()]
    checked = bool(set(PLAN_CHECKS) & set(best.verdict.evidence)) and final.status != pb.SOLVE_STATUS_UNVERIFIED
    return {
        "answer": final.answer,
        "good": same_answer(stated, gold),
        "status": pb.SolveStatus.Name(final.status).removeprefix("SOLVE_STATUS_").lower(),
        "selected": final.selected_draft_ids[0].rsplit("-", 1)[-1],
        "selected_answer": best.verdict.extracted_answer,
        "refine_tokens": final.usage.completion_tokens - sum(r.draft.usage.completion_tokens for r in final.drafts),
        "refine_latency_s": round(final.timings.refine.ToTimedelta().total_seconds(), 3),
        "final_line": bool(lines) and bool(PLAIN_FINAL_LINE.match(lines[-1].strip())),
        "checked_answer_changed": checked and not same_answer(stated, best.verdict.extracted_answer),
        "prefix_chars": len(final.consensus_prefix),
        "replaced": "refinement rejected" in final.status_reason,
        "status_reason": final.status_reason,
    }


def through_gateway(url: str, problem: dict, way: str, timeout: float) -> dict:
    """The same request through the gateway's stream: seconds from the drafts' end (the last `: draft_verified`
    comment) to the first `delta.content`."""
    question = labelled(problem["question"], "gateway", way)
    body = {"model": "deliberate", "messages": [{"role": "user", "content": question}], "stream": True,
            "num_drafts": len(problem["drafts"]), "seed": SEED, "disable_quorum": True, "final_text": way}  # fmt: skip
    request = urllib.request.Request(
        f"{url}/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    started = time.perf_counter()
    drafts_end = first_content = None
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        for raw in reply:
            line, now = raw.decode().strip(), time.perf_counter() - started
            if line == ": draft_verified":
                drafts_end = now
            elif first_content is None and line.startswith("data: {"):
                choices = json.loads(line.removeprefix("data: ")).get("choices") or [{}]
                if choices[0].get("index") == 0 and choices[0].get("delta", {}).get("content"):
                    first_content = now
    return {"first_content_after_drafts_s": round(first_content - drafts_end, 3)}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))], 3)


def way_figures(records: list[dict], way: str) -> dict:
    rows = [r["ways"][way]["grpc"] for r in records]
    gateway = [r["ways"][way]["gateway"] for r in records if "gateway" in r["ways"][way]]
    latencies = [row["refine_latency_s"] for row in rows]
    return {
        "accuracy": round(100 * sum(row["good"] for row in rows) / len(rows), 1),
        "refine_tokens_mean": round(statistics.mean(row["refine_tokens"] for row in rows), 1),
        "refine_latency_p50_s": percentile(latencies, 0.5),
        "refine_latency_p95_s": percentile(latencies, 0.95),
        "first_content_after_drafts_s": percentile([row["first_content_after_drafts_s"] for row in rows], 0.5),
        "gateway_first_content_after_drafts_s": (
            percentile([g["first_content_after_drafts_s"] for g in gateway], 0.5) if gateway else None
        ),
        "final_line_share": round(sum(row["final_line"] for row in rows) / len(rows), 3),
        "checked_answers_changed": sum(row["checked_answer_changed"] for row in rows),
        "refinements_replaced": sum(row["replaced"] for row in rows),
    }


def summary(records: list[dict]) -> dict:
    ways = {way: way_figures(records, way) for way in WAYS}
    prefix, refine = ways["prefix"], ways["refine"]
    ratios = {
        "prefix_token_ratio": round(prefix["refine_tokens_mean"] / max(refine["refine_tokens_mean"], 1e-9), 3),
        "prefix_latency_p95_ratio": round(
            prefix["refine_latency_p95_s"] / max(refine["refine_latency_p95_s"], 1e-9), 3
        ),
        "prefix_accuracy_change_points": round(prefix["accuracy"] - refine["accuracy"], 1),
    }
    prefix_earns_it = (
        ratios["prefix_token_ratio"] <= PREFIX_MAX_TOKEN_RATIO
        and ratios["prefix_latency_p95_ratio"] <= PREFIX_MAX_LATENCY_P95_RATIO
        and ratios["prefix_accuracy_change_points"] >= PREFIX_MIN_ACCURACY_CHANGE
    )
    best = max(figures["accuracy"] for figures in ways.values())
    eligible = [
        way for way in WAYS if ways[way]["accuracy"] >= best - ALLOWANCE_POINTS and (way != "prefix" or prefix_earns_it)
    ]
    default = min(eligible, key=lambda way: (ways[way]["refine_tokens_mean"], ways[way]["refine_latency_p50_s"]))
    # Tied drafts may be ranked in another order from one call to the next ("54" and "54 cubic feet"): compare answers.
    same_selection = sum(
        all(
            same_answer(r["ways"][way]["grpc"]["selected_answer"], r["ways"]["refine"]["grpc"]["selected_answer"])
            for way in WAYS
        )
        for r in records
    )
    n = len(records)
    return {
        "problems": n,
        "default": default,
        "rule": RULE,
        "ways": ways,
        **ratios,
        "prefix_meets_targets": prefix_earns_it,
        "prefix_found_share": round(sum(r["ways"]["prefix"]["grpc"]["prefix_chars"] > 0 for r in records) / n, 3),
        "same_selection_share": round(same_selection / n, 3),
    }


def markdown(figures: dict) -> str:
    rows = ["| way | accuracy | refine tokens (mean) | refine p50 / p95 | first content after drafts (gRPC / gateway) "
            "| final line | checked answers changed |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for way, f in figures["ways"].items():
        gateway = f["gateway_first_content_after_drafts_s"]
        gateway = "—" if gateway is None else f"{gateway} s"
        mark = " (default)" if way == figures["default"] else ""
        rows.append(
            f"| {way}{mark} | {f['accuracy']} % | {f['refine_tokens_mean']} | {f['refine_latency_p50_s']} s / "
            f"{f['refine_latency_p95_s']} s | {f['first_content_after_drafts_s']} s / {gateway} | "
            f"{100 * f['final_line_share']:.0f} % | {f['checked_answers_changed']} |"
        )
    return (
        f"# Three ways to the final text ({figures['problems']} tuning problems, `make refine-ways`)\n\n"
        + "\n".join(rows)
        + f"\n\nRule: {figures['rule']}. Default: **{figures['default']}**. Prefix against refine: tokens "
        f"{figures['prefix_token_ratio']}×, latency p95 {figures['prefix_latency_p95_ratio']}×, accuracy "
        f"{figures['prefix_accuracy_change_points']:+} points (a prefix found on "
        f"{100 * figures['prefix_found_share']:.0f} % of problems). Every way selected a draft of the same answer on "
        f"{100 * figures['same_selection_share']:.0f} % of problems.\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drafts-from", type=Path, default=LAB_FILES / "refine-drafts.runs.jsonl",
                        help="runs file of recorded first rounds (make refine-drafts)")  # fmt: skip
    parser.add_argument("--limit", type=int, default=60, help="problems (default 60)")
    parser.add_argument("--refiner-model", default=DEFAULT_REFINER_MODEL)
    parser.add_argument("--no-gateway", action="store_true", help="gRPC only (half the refinements)")
    parser.add_argument("--timeout", type=float, default=600.0, help="deadline of each solve, seconds")
    parser.add_argument("--runs", type=Path, default=LAB_FILES / "refine.runs.jsonl")
    parser.add_argument("--name", default="refine", help="<results-dir>/<name>.{json,md}")
    parser.add_argument("--results-dir", type=Path, default=LAB_FILES)
    args = parser.parse_args(argv)

    problems = recorded_rounds(args.drafts_from, args.limit)
    done = read_runs_by_id(args.runs)
    todo = [p for p in problems if p["id"] not in done]
    if todo:
        directory = Path(tempfile.mkdtemp(prefix="refine-ways-"))
        recording = directory / "drafts.jsonl"
        recording.write_text(recording_lines(problems))
        stack = Stack(
            ports=Ports.free(),
            env={"DELIBERATE_ENGINE": "recorded", "DELIBERATE_MODEL": str(recording)},
            refiner_env={"DELIBERATE_ENGINE": "llamacpp", "DELIBERATE_MODEL": args.refiner_model},
            log_dir=directory / "logs",
            state_dir=directory / "state",
            scheduler_args=["--max-redrafts", "0"],  # one round: every draft is a recorded one
            with_gateway=not args.no_gateway,
        )
        with stack, DeliberateClient(stack.address) as client:
            for problem in todo:
                turn = len(done) % len(WAYS)
                order = [*WAYS][turn:] + [*WAYS][:turn]
                ways = {way: {"grpc": through_grpc(client, problem, way, args.timeout)} for way in order}
                if not args.no_gateway:
                    for way in order:
                        ways[way]["gateway"] = through_gateway(stack.gateway_url, problem, way, args.timeout)
                record = {"id": problem["id"], "gold": problem["gold"], "order": order, "ways": ways}
                append_run(args.runs, record)
                done[problem["id"]] = record
                print(problem["id"], {w: (v["grpc"]["good"], v["grpc"]["refine_tokens"]) for w, v in ways.items()},
                      flush=True)  # fmt: skip
    records = [done[p["id"]] for p in problems if p["id"] in done]
    figures = {**summary(records), "drafts_from": str(args.drafts_from), "refiner_model": args.refiner_model}
    path = write_result(args.name, figures, args.results_dir)
    (args.results_dir / f"{args.name}.md").write_text(markdown(figures))
    print(path.read_text())


if __name__ == "__main__":
    main()
