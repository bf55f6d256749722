"""`deliberate up` starts the four services; `deliberate solve "…"` asks a question and shows each stage live."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import grpc

from deliberate.common.v1 import common_pb2
from deliberate.scheduler.v1 import scheduler_service_pb2 as pb

from . import evaluation
from .client import DeliberateClient, build_request, to_json
from .stack import Ports, Stack

EXAMPLE_QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="deliberate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", help="start drafter, verifier, refiner and scheduler as local processes")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=Ports.scheduler, help="the Scheduler's port")
    up.add_argument("--log-dir", type=Path, default=Path(".deliberate/logs"))
    up.add_argument("--solve-example", action="store_true", help="solve an example question once all are up")
    up.add_argument(
        "--state",
        choices=("file", "redis"),
        default="file",
        help="where the Scheduler keeps learned weights and feedback: a local file, or a redis-server started here "
        "on a free loopback port (data in .deliberate/redis), as Scheduler replicas share it",
    )
    # The default model writes ~150-250 tokens per GSM8K draft with the brief prompt (docs/models.md).
    up.add_argument("--example-max-new-tokens", type=int, default=320)

    solve = commands.add_parser("solve", help="solve one question through the Scheduler")
    solve.add_argument("prompt", nargs="?", help="the question (or use --example)")
    solve.add_argument("--example", choices=sorted(EXAMPLES), help="solve a worked example with its constraints")
    add_solve_options(solve)

    evaluate = commands.add_parser(
        "eval", help="compare single pass, self-consistency, best-of-N and the pipeline on GSM8K (docs/eval.md)"
    )
    evaluation.add_arguments(evaluate)

    args = parser.parse_args(argv)
    if args.command == "up":
        sys.exit(run_up(args))
    if args.command == "eval":
        sys.exit(evaluation.run(args))
    sys.exit(run_solve(args))


def add_solve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", default="127.0.0.1:50051", help="the Scheduler's host:port")
    parser.add_argument("--num-drafts", type=int, default=0, help="0 lets the Scheduler choose")
    parser.add_argument("--max-new-tokens", type=int, help="per draft")
    parser.add_argument("--refine-max-new-tokens", type=int, help="for the final answer")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--schema", type=Path, help="file with a JSON Schema for the structured answer")
    parser.add_argument("--context", type=Path, help="file with a JSON object the constraints may read")
    parser.add_argument(
        "--constraints", type=Path, help="file with a JSON list of constraints (protobuf JSON mapping of Constraint)"
    )
    parser.add_argument(
        "--check-arithmetic",
        action="store_true",
        help="declare the arithmetic rule pack (the Scheduler adds it by default to a request without --schema)",
    )
    parser.add_argument(
        "--no-default-arithmetic",
        action="store_true",
        help="do not add the arithmetic rule pack by default (SolveRequest.disable_default_arithmetic)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="deadline in seconds")
    parser.add_argument("--json", action="store_true", help="print the final response in protobuf's JSON mapping")


def run_up(args: argparse.Namespace) -> int:
    ports = Ports(scheduler=args.port)
    stack = Stack(ports=ports, host=args.host, log_dir=args.log_dir, state=args.state)
    print(f"starting drafter, verifier, refiner, scheduler (logs in {args.log_dir}/) …", flush=True)
    started = time.monotonic()
    try:
        stack.up()
    except (RuntimeError, TimeoutError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        stack.down()
        return 1
    print(f"all four services SERVING after {time.monotonic() - started:.1f}s; scheduler at {stack.address}")
    for service in ("drafter", "verifier", "refiner", "scheduler"):
        process = stack.processes.get(service)
        owner = f"pid {process.pid:<7}" if process else "supervised by the scheduler (watchdog restarts it)"
        print(f"  {service:<9} {stack.address_of(service)}  {owner}")
    if stack.redis is not None:
        print(f"  {'redis':<9} {stack.redis.url}  pid {stack.redis.process.pid} (data in {stack.redis.data_dir}/)")
    # Installed explicitly: a shell that starts us in the background leaves SIGINT ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop_serving)
    try:
        if args.solve_example:
            print(f"\nsolving an example: {EXAMPLE_QUESTION}\n")
            example = argparse.Namespace(
                prompt=EXAMPLE_QUESTION, address=stack.address, num_drafts=5,
                max_new_tokens=args.example_max_new_tokens, refine_max_new_tokens=args.example_max_new_tokens,
                temperature=None, seed=None, schema=None, context=None, timeout=300.0, json=False,
                example=None, constraints=None, check_arithmetic=True,
            )  # fmt: skip
            run_solve(example)
            print(f'\nstill serving at {stack.address}; try: deliberate solve "your question"  (Ctrl-C stops all four)')
        while True:
            for service, process in stack.processes.items():
                if process.poll() is not None:
                    print(
                        f"{service} exited with code {process.returncode}; stopping the others",
                        file=sys.stderr,
                    )
                    return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not abandon the shutdown
            signal.signal(signum, signal.SIG_IGN)
        print("\nstopping …", flush=True)
        codes = stack.down()
        print("stopped: " + ", ".join(f"{s} ({c})" for s, c in codes.items()))
    return 0


def example_ad_selection() -> dict:
    from deliberate.examples import ads

    return {
        "prompt": ads.prompt(),
        "output_schema": json.dumps(ads.OUTPUT_SCHEMA),
        "constraints": ads.CONSTRAINTS,
        "context": ads.context(),
    }


EXAMPLES = {"ad-selection": example_ad_selection}


def request_from_args(args: argparse.Namespace):
    example = EXAMPLES[args.example]() if getattr(args, "example", None) else {}
    constraints = list(example.get("constraints", []))
    if getattr(args, "constraints", None):
        constraints += json.loads(args.constraints.read_text())
    if getattr(args, "check_arithmetic", False):
        constraints.append({"rulePack": "arithmetic"})
    prompt = args.prompt or example.get("prompt")
    if not prompt:
        raise SystemExit("error: give a prompt or --example")
    return build_request(
        prompt,
        num_drafts=args.num_drafts,
        max_new_tokens=args.max_new_tokens,
        refine_max_new_tokens=args.refine_max_new_tokens,
        temperature=args.temperature,
        seed=args.seed,
        output_schema=args.schema.read_text() if args.schema else example.get("output_schema", ""),
        context=json.loads(args.context.read_text()) if args.context else example.get("context"),
        constraints=constraints,
        disable_default_arithmetic=getattr(args, "no_default_arithmetic", False),
    )


def stop_serving(*_: object) -> None:
    raise KeyboardInterrupt


def run_solve(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    view = ProgressView(quiet=args.json)
    with DeliberateClient(args.address) as client:
        try:
            for event in client.solve_stream(request, timeout=args.timeout):
                view.show(event)
        except grpc.RpcError as error:
            print(f"\nerror: {error.code().name}: {error.details()}", file=sys.stderr)
            return 2
    if args.json:
        print(to_json(view.final))
    return 0 if view.final is not None and view.final.status != pb.SOLVE_STATUS_FAILED else 1


class ProgressView:
    """Prints each stage event as it arrives, then a summary of every draft's verdict."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.final: pb.SolveResponse | None = None
        self.index: dict[str, int] = {}
        self.refining = False

    def say(self, text: str = "", end: str = "\n") -> None:
        if not self.quiet:
            print(text, end=end, flush=True)

    def show(self, event: pb.SolveStreamResponse) -> None:
        kind = event.WhichOneof("event")
        if kind == "round_started":
            r = event.round_started
            self.say(f"round {r.round}: {r.num_drafts} drafts — {r.reason}")
            if r.feedback:
                self.say(f"  feedback into the prompt: {r.feedback}")
        elif kind == "draft_generated":
            d = event.draft_generated.draft
            self.index[d.id] = d.index
            reason = common_pb2.FinishReason.Name(d.finish_reason).removeprefix("FINISH_REASON_").lower()
            self.say(
                f"  draft #{d.index} generated  {d.usage.completion_tokens:>4} tokens  {reason:<7}"
                f" {d.generation_latency.ToTimedelta().total_seconds():5.1f}s  [{d.strategy}]"
            )
        elif kind == "draft_verified":
            v = event.draft_verified.verdict
            mark = "valid  " if v.valid else "INVALID"
            failed = [r.message for r in v.rule_results if not r.passed]
            abstained = [r.message for r in v.rule_results if r.abstained]
            detail = f"  ({'; '.join(failed + abstained)})" if failed or abstained else ""
            checked = f"  checked by {', '.join(v.evidence)}" if v.evidence else ("  format only" if v.valid else "")
            self.say(
                f"  draft #{self.index.get(v.draft_id, '?')} verified   {mark} score {v.score:.2f}{checked}{detail}"
            )
        elif kind == "draft_selected":
            s = event.draft_selected
            self.say(f"  draft #{self.index.get(s.draft_id, '?')} selected   rank {s.rank}, score {s.score:.2f}")
        elif kind == "draft_discarded":
            s = event.draft_discarded
            self.say(f"  draft #{self.index.get(s.draft_id, '?')} discarded  {s.reason}")
        elif kind == "refine_chunk":
            if not self.refining:
                self.refining = True
                self.say("\nanswer (streaming from the refiner):")
            self.say(event.refine_chunk.text, end="")
        elif kind == "final":
            self.final = event.final
            self.summary(event.final)

    def summary(self, r: pb.SolveResponse) -> None:
        t = r.timings
        stages = ("draft", "verify", "select", "refine", "total")
        timing = "  ".join(f"{s} {getattr(t, s).ToTimedelta().total_seconds():.2f}s" for s in stages)
        self.say(f"\n\nstatus  {pb.SolveStatus.Name(r.status).removeprefix('SOLVE_STATUS_')} — {r.status_reason}")
        for line in verified_by_lines(r):
            self.say(line)
        self.say(f"drafts  {r.num_drafts} per round ({r.num_drafts_reason}); rounds {r.rounds}; verdicts:")
        for report in r.drafts:
            v, c = report.verdict, report.components
            mark = "*" if report.selected else " "
            self.say(
                f" {mark} r{report.round} #{report.draft.index} {'valid  ' if v.valid else 'invalid'} "
                f"final {c.final:.3f} = {c.alpha:.2f}·{c.score:.2f} + {c.beta:.2f}·{c.agreement:.2f} "
                f"+ {c.delta:.2f}·{c.answer_share:.2f} − {c.gamma:.3f}·{c.latency:.2f}"
                + (f"  duplicate of {report.duplicate_of}" if report.duplicate_of else "")
            )
            self.say("      " + "; ".join(x.message for x in v.rule_results))
        self.say(f"refine  budget {r.refine_token_budget} tokens ({r.refine_budget_reason})")
        if r.consensus_prefix:
            self.say(f"        started from the drafts' consensus prefix: {r.consensus_prefix.strip()[:120]!r}")
        self.say(f"tokens  prompt {r.usage.prompt_tokens}, completion {r.usage.completion_tokens}")
        self.say(f"timings {timing}")
        self.say(f"trace   {r.trace_id}   request {r.request_id}")


def verified_by_lines(r: pb.SolveResponse) -> list[str]:
    """The checks behind a VERIFIED status, each with the best selected draft's message for it:
    ``checked arithmetic passed: 2 equations recomputed, all correct``."""
    if r.status != pb.SOLVE_STATUS_VERIFIED or not r.verified_by:
        return []
    best = next((d for d in r.drafts if r.selected_draft_ids and d.draft.id == r.selected_draft_ids[0]), None)
    messages = {x.rule_id: x.message for x in best.verdict.rule_results} if best else {}
    if best is not None and best.verdict.HasField("judge"):
        judge = best.verdict.judge
        messages["judge"] = f"judge (hard) found it valid, score {judge.score:.2f}"
    return [f"checked {messages.get(rule_id, rule_id)}" for rule_id in r.verified_by]


if __name__ == "__main__":
    main()
