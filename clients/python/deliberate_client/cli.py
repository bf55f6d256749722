"""`deliberate solve "…"` asks a question and shows each stage live.

Other commands come with the distributions that register them in the entry-point group `deliberate.commands` (each
entry point is a function that takes the subcommands' `argparse` action, adds its parser and sets `run`, args -> exit
code, as its default): the servers' `deliberate up` and `deliberate traces`, which with the client alone say what to
install, and whatever else is installed (a checkout's evaluation lab adds `deliberate bench`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import grpc

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from . import notify
from .client import DeliberateClient, build_request, to_json
from .progress import ProgressView

COMMANDS_GROUP = "deliberate.commands"
# The servers' commands, named here so that the client alone can say what to install for them: the source of their
# names and purposes, which the servers' entry points match (tests/repo/test_commands_declared.py).
SERVER_COMMANDS = {
    "up": "start drafter, verifier, refiner, scheduler and the OpenAI-compatible gateway as local processes",
    "traces": "per-stage latency, draft funnel and rejecting rules from the services' spans (docs/telemetry.md)",
}
SERVERS_INSTALL_HINT = "the server distribution `deliberate` (pip install -e . in a checkout)"

EXAMPLE_QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?"
)
# Exit statuses of `deliberate solve` besides 0.
EXIT_FAILED = 1  # SOLVE_STATUS_FAILED: no answer
EXIT_RPC_ERROR = 2
EXIT_NOT_NOTIFIED = 3  # the answer was printed, but the webhook did not take it
# The statuses of an answered request, any of which --notify may deliver.
ANSWERED = ("verified", "computation_checked", "unchecked", "unverified")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="deliberate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    solve = commands.add_parser("solve", help="solve one question through the Scheduler")
    add_solve_arguments(solve)
    solve.set_defaults(run=run_solve)

    installed = {entry.name: entry for entry in entry_points(group=COMMANDS_GROUP)}
    for name in sorted(installed):
        installed[name].load()(commands)
    for name, purpose in SERVER_COMMANDS.items():
        if name not in installed:
            missing = commands.add_parser(name, help=f"{purpose} (needs deliberate)", add_help=False)
            missing.set_defaults(run=needs_server)

    # Known args only, so that `deliberate up --solve-example` without the servers still says what is missing.
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.run is not needs_server:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    sys.exit(args.run(args))


def needs_server(args: argparse.Namespace) -> int:
    print(
        f"error: `deliberate {args.command}` comes with {SERVERS_INSTALL_HINT}; install it next to deliberate-client",
        file=sys.stderr,
    )
    return 2


def add_solve_arguments(parser: argparse.ArgumentParser) -> None:
    """`deliberate solve`'s arguments; `deliberate up --solve-example` parses its example with them too."""
    parser.add_argument("prompt", nargs="?", help="the question (or use --example)")
    parser.add_argument("--example", choices=sorted(EXAMPLES), help="solve a worked example with its constraints")
    add_solve_options(parser)


def add_solve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", default="127.0.0.1:50051", help="the Scheduler's host:port")
    # Not DELIBERATE_TLS_*: those are the services' own certificate, and `deliberate up` passes its
    # environment on to them.
    for option, purpose in (
        ("ca", "PEM CA bundle that verifies a TLS Scheduler"),
        ("cert", "PEM client certificate for an mTLS Scheduler"),
        ("key", "PEM private key of --tls-cert-file"),
    ):
        env = f"DELIBERATE_CLIENT_TLS_{option.upper()}_FILE"
        parser.add_argument(f"--tls-{option}-file", default=os.environ.get(env, ""), help=f"{purpose} (env {env})")
    parser.add_argument(
        "--token-file",
        type=Path,
        help="file holding the bearer token a Scheduler with --auth-tokens-file wants (or env DELIBERATE_TOKEN)",
    )
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
    parser.add_argument(
        "--selection-policy",
        default="",
        help="the policy that ranks the drafts: weighted, majority, best_of (docs/selection.md;"
        " SolveRequest.selection_policy; default: the Scheduler's --selection-policy)",
    )
    parser.add_argument(
        "--program-drafts",
        type=int,
        help="how many of the drafts are Python programs run in the Verifier's sandbox (SolveRequest.program_drafts;"
        " default: the Scheduler's --program-drafts)",
    )
    parser.add_argument(
        "--draft-count",
        choices=["cascade", "all_at_once", "adaptive"],
        default="",
        help="the cascade (a greedy program and prose draft first, more only while they disagree or fail), all at "
        "once, or adaptively: one at a time until valid drafts agree (SolveRequest.draft_count; default: the "
        "Scheduler's --draft-count)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="deadline in seconds")
    parser.add_argument("--json", action="store_true", help="print the final response in protobuf's JSON mapping")
    parser.add_argument(
        "--request-id", default="", help="the request's id (default: the Scheduler's); the webhook's Idempotency-Key"
    )
    add_notify_options(parser)


def add_notify_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--notify",
        metavar="URL",
        type=webhook_url,
        help="POST the final answer as JSON to this webhook, with retries and an Idempotency-Key header"
        " (docs/business-cases.md#delivery-to-a-webhook)",
    )
    parser.add_argument(
        "--notify-status",
        type=notify_statuses,
        default=["verified"],
        help=f"comma-separated statuses worth delivering, of {', '.join(ANSWERED)} (default: verified)",
    )
    parser.add_argument(
        "--notify-attempts", type=positive(int), default=notify.Policy.attempts, help="attempts at most"
    )
    parser.add_argument(
        "--notify-timeout", type=positive(float), default=notify.Policy.timeout_s, help="seconds each attempt may take"
    )


def webhook_url(text: str) -> str:
    try:
        return notify.check_url(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def notify_statuses(text: str) -> list[str]:
    chosen = [s.strip().lower() for s in text.split(",") if s.strip()]
    if not chosen or any(s not in ANSWERED for s in chosen):
        raise argparse.ArgumentTypeError(f"{text!r}: choose among {', '.join(ANSWERED)}")
    return chosen


def positive(kind: type) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def example_ad_selection() -> dict:
    from deliberate_client.examples import ads

    return {
        "prompt": ads.prompt(),
        "output_schema": json.dumps(ads.OUTPUT_SCHEMA),
        "constraints": ads.CONSTRAINTS,
        "context": ads.context(),
    }


def example_credit_offer() -> dict:
    from deliberate_client.examples import credit

    return {
        "prompt": credit.prompt(),
        "output_schema": json.dumps(credit.OUTPUT_SCHEMA),
        "constraints": credit.CONSTRAINTS,
        "context": credit.context(),
    }


def example_promotion() -> dict:
    from deliberate_client.examples import promotion

    return {
        "prompt": promotion.prompt(),
        "output_schema": json.dumps(promotion.output_schema()),
        "constraints": promotion.constraints(),
        "context": promotion.context(),
    }


EXAMPLES = {
    "ad-selection": example_ad_selection,
    "credit-offer": example_credit_offer,
    "promotion": example_promotion,
}


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
        selection_policy=getattr(args, "selection_policy", "") or "",
        program_drafts=getattr(args, "program_drafts", None),
        draft_count=getattr(args, "draft_count", "") or "",
        request_id=getattr(args, "request_id", ""),
    )


def client_from_args(args: argparse.Namespace) -> DeliberateClient:
    """The client the connection options describe (the token never as a flag: a command line is visible)."""
    token = args.token_file.read_text().strip() if args.token_file else os.environ.get("DELIBERATE_TOKEN", "")
    return DeliberateClient(
        args.address,
        tls_ca_file=args.tls_ca_file,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        token=token,
    )


def run_solve(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    view = ProgressView(quiet=args.json)
    with client_from_args(args) as client:
        try:
            for event in client.solve_stream(request, timeout=args.timeout):
                view.show(event)
        except grpc.RpcError as error:
            print(f"\nerror: {error.code().name}: {error.details()}", file=sys.stderr)
            return EXIT_RPC_ERROR
    if args.json:
        print(to_json(view.final))
    if view.final is None or view.final.status == pb.SOLVE_STATUS_FAILED:
        if args.notify:
            print(f"notify: nothing sent to {args.notify}: the request failed", file=sys.stderr)
        return EXIT_FAILED
    if args.notify and not notified(view.final, args):
        return EXIT_NOT_NOTIFIED
    return 0


def notified(final: pb.SolveResponse, args: argparse.Namespace) -> bool:
    """Delivers the answer to --notify (after it was printed: a webhook that fails never loses it); says on
    stderr what happened. False only when the webhook should have taken it and did not."""
    status = pb.SolveStatus.Name(final.status).removeprefix("SOLVE_STATUS_").lower()
    if status not in args.notify_status:
        print(
            f"notify: not sent to {args.notify}: status {status} is not in --notify-status"
            f" ({','.join(args.notify_status)})",
            file=sys.stderr,
        )
        return True
    policy = notify.Policy(attempts=args.notify_attempts, timeout_s=args.notify_timeout)
    delivery = notify.deliver(args.notify, notify.payload(final), final.request_id, policy)
    if delivery.delivered:
        print(f"notify: delivered to {args.notify} ({delivery.detail}, attempt {delivery.attempts})", file=sys.stderr)
        return True
    print(f"error: notify {args.notify}: {delivery.detail}; the answer (above) was not delivered", file=sys.stderr)
    return False


if __name__ == "__main__":
    main()
