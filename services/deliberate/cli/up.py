"""`deliberate up`: the four services as local processes (drafter, verifier, refiner, scheduler), the risk-model
service the Verifier's credit pack calls, and the OpenAI-compatible gateway in front of them, kept serving until
Ctrl-C (a service that exits is restarted, cli/supervisor.py);
`--solve-example` solves one question through them first so a newcomer sees a staged answer."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from deliberate_client.cli import EXAMPLE_QUESTION, SERVER_COMMANDS, add_solve_arguments, run_solve

from .stack import GATEWAY, REPLICA_PORT_STEP, Ports, Stack, TlsFiles
from .supervisor import CrashLoop, Supervisor


def add_command(commands: argparse._SubParsersAction) -> None:
    """Registered in the entry-point group `deliberate.commands` (pyproject.toml)."""
    up = commands.add_parser("up", help=SERVER_COMMANDS["up"])
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=Ports.scheduler, help="the Scheduler's port")
    up.add_argument("--gateway-port", type=int, default=Ports.gateway, help="the OpenAI-compatible gateway's HTTP port")
    up.add_argument("--log-dir", type=Path, default=Path(".deliberate/logs"))
    up.add_argument("--solve-example", action="store_true", help="solve an example question once all are up")
    up.add_argument(
        "--state",
        choices=("file", "redis"),
        default="file",
        help="where the Scheduler keeps learned weights and feedback: a local file, or a redis-server started here "
        "on a free loopback port (data in .deliberate/redis), as Scheduler replicas share it",
    )
    up.add_argument(
        "--trace-file",
        type=Path,
        help="every service appends its spans to this file (OTLP/JSON lines); read it with `deliberate traces`",
    )
    up.add_argument(
        "--tls-dir",
        type=Path,
        help="serve mTLS everywhere with the PEM files deploy/dev-certs.sh writes into this folder (docs/security.md)",
    )
    up.add_argument(
        "--auth-tokens-file",
        type=Path,
        help="the Scheduler demands a bearer token listed in this file (docs/security.md); "
        "the example solve sends $DELIBERATE_TOKEN",
    )
    up.add_argument(
        "--drafters",
        type=int,
        default=1,
        help="Drafter replicas (default 1): the second on port 50062 (metrics 9475), the third on 50072, …; with "
        "more than one each runs DELIBERATE_ENGINE_THREADS=1 and the Scheduler balances over all of them "
        "(docs/deploy.md#load-balancing)",
    )
    up.add_argument(
        "--drafter-model",
        help="the Drafters' model (DELIBERATE_MODEL of the Drafter only; default: $DELIBERATE_MODEL, else the "
        "default embedded model, qwen2.5-coder-1.5b): embedded, qwen2.5-coder-0.5b, smollm2-135m or a path",
    )
    up.add_argument(
        "--refiner-model",
        help="the Refiner's model, the same way (default: $DELIBERATE_MODEL, else the Refiner's default, "
        "qwen2.5-coder-0.5b: docs/models.md#the-frontier-which-model-where)",
    )
    # The default model writes ~150-250 tokens per GSM8K draft with the brief prompt (docs/models.md).
    up.add_argument("--example-max-new-tokens", type=int, default=320)
    up.set_defaults(run=run_up)


def run_up(args: argparse.Namespace) -> int:
    ports = Ports(scheduler=args.port, gateway=args.gateway_port)
    tls = TlsFiles.in_dir(args.tls_dir) if args.tls_dir else None
    if args.drafters < 1:
        print(f"error: --drafters must be at least 1, not {args.drafters}", file=sys.stderr)
        return 2
    replica_ports = [
        (ports.drafter + REPLICA_PORT_STEP * i, ports.drafter_metrics + REPLICA_PORT_STEP * i)
        for i in range(1, args.drafters)
    ]
    stack = Stack(
        ports=ports, host=args.host, log_dir=args.log_dir, state=args.state, trace_file=args.trace_file,
        tls=tls, auth_tokens_file=args.auth_tokens_file, drafters=args.drafters, drafter_ports=replica_ports,
        drafter_env=model_env(args.drafter_model), refiner_env=model_env(args.refiner_model),
    )  # fmt: skip
    names = ", ".join(stack.services()) + ", " + GATEWAY
    print(f"starting {names} (logs in {args.log_dir}/) …", flush=True)
    started = time.monotonic()
    try:
        stack.up()
    except (RuntimeError, TimeoutError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        stack.down()
        return 1
    print(
        f"all four services, the risk model and the gateway SERVING after {time.monotonic() - started:.1f}s; "
        f"scheduler at {stack.address}, OpenAI-compatible API at {stack.gateway_url}/v1"
    )
    for service in stack.services():
        process = stack.processes.get(service)
        owner = f"pid {process.pid:<7}" if process else "supervised by the scheduler (watchdog restarts it)"
        print(f"  {service:<9} {stack.address_of(service)}  {stack.metrics_url(service)}  {owner}")
    gateway = stack.processes[GATEWAY]
    print(f"  {GATEWAY:<9} {stack.gateway_url}  pid {gateway.pid:<7} (OpenAI-compatible: /v1/chat/completions)")
    if args.trace_file:
        print(f"  spans appended to {args.trace_file}; deliberate traces --file {args.trace_file}")
    if stack.redis is not None:
        print(f"  {'redis':<9} {stack.redis.url}  pid {stack.redis.process.pid} (data in {stack.redis.data_dir}/)")
    # Risk, drafter, refiner, scheduler and gateway are restarted here when one exits; the Verifier by the watchdog.
    supervisor = Supervisor(stack)
    # Installed explicitly: a shell that starts us in the background leaves SIGINT ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop_serving)
    try:
        if args.solve_example:
            print(f"\nsolving an example: {EXAMPLE_QUESTION}\n")
            # Parsed by `deliberate solve`'s own parser, so every option it has gets its default here too.
            solve_parser = argparse.ArgumentParser()
            add_solve_arguments(solve_parser)
            example = solve_parser.parse_args([
                EXAMPLE_QUESTION, "--address", stack.address, "--num-drafts", "5", "--check-arithmetic",
                "--max-new-tokens", str(args.example_max_new_tokens),
                "--refine-max-new-tokens", str(args.example_max_new_tokens),
                "--tls-ca-file", str(tls.ca) if tls else "", "--tls-cert-file", str(tls.client_cert) if tls else "",
                "--tls-key-file", str(tls.client_key) if tls else "",
            ])  # fmt: skip
            run_solve(example)
            print(f'\nstill serving at {stack.address}; try: deliberate solve "your question"  (Ctrl-C stops them all)')
        while True:
            supervisor.check()
            time.sleep(0.5)
    except CrashLoop as error:
        print(f"error: {error}; stopping the stack", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        ignore_stop_signals()  # a signal's handler already did; a crash loop or an error did not
        print("\nstopping …", flush=True)
        codes = stack.down()
        print("stopped: " + ", ".join(f"{s} ({c})" for s, c in codes.items()))
    return 0


def model_env(model: str | None) -> dict[str, str]:
    return {"DELIBERATE_MODEL": model} if model else {}


def stop_serving(*_: object) -> None:
    """The first SIGINT or SIGTERM stops serving. Any later one is ignored from here on, before the shutdown
    begins: a second Ctrl-C, or a SIGTERM right behind the first, must not abandon it half done."""
    ignore_stop_signals()
    raise KeyboardInterrupt


def ignore_stop_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
