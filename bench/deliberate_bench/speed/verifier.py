"""Rules-only verification speed on ad-selection drafts.

    deliberate bench verifier [--drafts 20000] [--seconds 5] [--workers 0] [--channels 8]

1. In-process, one core: drafts/s and p99 latency per draft through the full rule list of the
   ad-selection example (parse, output schema, 2 CEL constraints, the ad_selection pack, arithmetic),
   plus each rule family's share of the time.
2. Over gRPC on loopback: VerifyDrafts calls/s with 5 drafts per call against a real Verifier, 8 calls in flight,
   side by side: one Verifier process and one connection from a Python asyncio client (a single Scheduler's), then
   `--workers` processes on the port (0: one per core) and `--channels` connections, as several Scheduler replicas
   would call it, loaded first by the Python client and then by clients/go/cmd/verifier-load (built offline from
   Debian's Go packages; skipped, saying why, without them). The kernel spreads connections, not calls, over the
   workers. On 2 cores the Python client takes most of a core the servers then lack; the Go one a fraction.
Writes bench/studies/speed/verifier.json: drafts_per_s_per_core (and drafts_per_cpu_s), p99_ms, grpc_calls_per_s (the
second setup under the Go client, `grpc_load_generator` "go"; the Python client's figure where Go is missing),
grpc_calls_per_s_python_client, grpc_calls_per_s_one_process, grpc_go_client_cpu_share, the families, and `goals`
with `passed` per goal (issue 13).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

from deliberate_bench.results import write_result
from deliberate_client.examples import ads

FAMILIES = {
    "complete": "parse",
    "json_parse": "parse",
    "json_schema": "schema",
    "size_check": "cel",
    "pool_check": "cel",
    "arithmetic": "arithmetic",
}


def sample_drafts(count: int, seed: int = 1) -> list[str]:
    """Plausible drafts: reasoning with a little arithmetic, then a JSON plan; some over budget, some in
    conflict, some with broken JSON (curly quotes, trailing commas)."""
    rng = random.Random(seed)
    catalog = list(ads.load_catalog())
    drafts = []
    for n in range(count):
        picks = rng.sample(catalog, 5)
        total = sum(a.cost for a in picks)
        ids = json.dumps([a.id for a in picks])
        body = f'{{"selected_ids": {ids}}}'
        if n % 7 == 3:
            body = body.replace('"', "\u201c", 1).replace('"', "\u201d", 1)
        if n % 11 == 5:
            body = body[:-1] + ",}"
        steps = " + ".join(str(a.cost) for a in picks)
        drafts.append(
            f"I pick the ads with the best CTR per cost.\nTotal cost: {steps} = {total}\n"
            f"That is within the budget of {ads.BUDGET}.\n```json\n{body}\n```"
        )
    return drafts


def rule_set():
    from deliberate.verifier.constraints import ConstraintSpec, compile_rules

    names = {"jsonSchema": "json_schema", "celExpression": "cel_expression", "rulePack": "rule_pack"}
    specs = []
    for index, raw in enumerate([*ads.CONSTRAINTS, {"rulePack": "arithmetic"}]):
        kind = next(k for k in names if k in raw)
        specs.append(
            ConstraintSpec(index, names[kind], raw[kind], raw.get("id", ""), False, raw.get("params", {}),
                           raw.get("failureMessage", ""))
        )  # fmt: skip
    return compile_rules(json.dumps(ads.OUTPUT_SCHEMA), specs, ads.context())


def in_process(count: int) -> dict:
    from deliberate.verifier.rules import verify

    rules = rule_set()
    context = ads.context()
    drafts = sample_drafts(count)
    for text in drafts[:200]:  # warm caches
        verify(text, rules.rules, "stop", rules.output_schema, context)
    latencies, family_time, valid = [], defaultdict(float), 0
    started, cpu_started = time.perf_counter(), time.process_time()
    for text in drafts:
        t0 = time.perf_counter()
        verdict = verify(text, rules.rules, "stop", rules.output_schema, context)
        latencies.append(time.perf_counter() - t0)
        valid += verdict.valid
        for outcome in verdict.outcomes:
            family_time[FAMILIES.get(outcome.rule_id, "rule_pack")] += outcome.duration_s
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    latencies.sort()
    rule_total = sum(family_time.values())
    return {
        "drafts": count,
        "valid_share": round(valid / count, 3),
        "drafts_per_s_per_core": round(count / elapsed),
        # Per CPU second of this process: what the figure above is on a quiet machine, and less moved by other load.
        "drafts_per_cpu_s": round(count / cpu),
        "p50_ms": round(statistics.median(latencies) * 1e3, 4),
        "p99_ms": round(latencies[int(0.99 * count)] * 1e3, 4),
        "families": {f: round(t / rule_total, 3) for f, t in sorted(family_time.items(), key=lambda x: -x[1])},
        "family_us_per_draft": {f: round(t / count * 1e6, 2) for f, t in family_time.items()},
    }


DRAFTS_PER_CALL, IN_FLIGHT = 5, 8
GO_CLIENT = Path(__file__).resolve().parent.parent / "clients" / "go"
GOALS = {"drafts_per_s_per_core": (">=", 10_000), "p99_ms": ("<=", 1.0), "grpc_calls_per_s": (">=", 1_000)}


def verify_request():
    """The call every setup sends: 5 ad-selection drafts with the example's schema, constraints and context."""
    from google.protobuf import json_format, struct_pb2

    from deliberate_api.common.v1 import common_pb2
    from deliberate_api.verifier.v1 import verifier_service_pb2

    context = struct_pb2.Struct()
    context.update(ads.context())
    texts = sample_drafts(50)
    return verifier_service_pb2.VerifyDraftsRequest(
        prompt="select 5 ads",
        drafts=[common_pb2.Draft(id=f"d{i}", index=i, text=texts[i]) for i in range(DRAFTS_PER_CALL)],
        output_schema=json.dumps(ads.OUTPUT_SCHEMA),
        constraints=[json_format.ParseDict(c, common_pb2.Constraint()) for c in ads.CONSTRAINTS],
        context=context,
    )


@contextmanager
def verifier(workers: int):
    """A real Verifier of `workers` processes on free loopback ports, every worker serving; yields its address."""
    from deliberate.cli.stack import Ports, Stack

    stack = Stack(ports=Ports.free(), verifier_args=["--workers", str(workers)])
    stack.start("verifier")
    try:
        stack.wait_healthy(60, services=("verifier",))
        wait_all_workers(stack)
        yield stack.address_of("verifier")
    finally:
        stack.down()


async def python_client_calls(address: str, seconds: float, channels: int) -> float:
    """VerifyDrafts calls/s from one Python asyncio client over `channels` connections, IN_FLIGHT calls in flight."""
    import grpc

    from deliberate_api.verifier.v1 import verifier_service_pb2_grpc

    request = verify_request()
    # A local subchannel pool per channel: each its own connection, as separate clients have.
    opened = [
        grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(channels)
    ]
    stubs = [verifier_service_pb2_grpc.VerifierServiceStub(channel) for channel in opened]
    try:
        for _ in range(20):
            await asyncio.gather(*(stub.VerifyDrafts(request) for stub in stubs))
        done = 0
        deadline = time.perf_counter() + seconds

        async def worker(stub) -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                await stub.VerifyDrafts(request)
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker(stubs[n % channels]) for n in range(IN_FLIGHT)))
        elapsed = time.perf_counter() - started
    finally:
        for channel in opened:
            await channel.close()
    return round(done / elapsed)


def go_load_generator(build_dir: Path) -> Path | None:
    """clients/go/cmd/verifier-load built offline (Debian's Go packages, clients/go/offline.sh); None, saying why,
    where Go or grpc-go is not installed."""
    binary = build_dir / "verifier-load"
    built = subprocess.run(
        [str(GO_CLIENT / "offline.sh"), "go", "build", "-o", str(binary), "./cmd/verifier-load"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if built.returncode != 0:
        print(f"no Go load generator: {(built.stderr or built.stdout).strip()[-300:]}")
        return None
    return binary


def go_client_calls(binary: Path, address: str, seconds: float, channels: int) -> dict:
    """VerifyDrafts calls/s from the Go load generator (the same request), with its own CPU time."""
    request_file = binary.parent / "request.bin"
    request_file.write_bytes(verify_request().SerializeToString())
    command = [str(binary), "-addr", address, "-request", str(request_file), "-seconds", str(seconds),
               "-channels", str(channels), "-in-flight", str(IN_FLIGHT)]  # fmt: skip
    measured = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    if measured["errors"]:
        raise RuntimeError(f"{measured['errors']} calls failed: {measured['first_error']}")
    return measured


def wait_all_workers(stack, timeout_s: float = 60.0) -> None:
    """gRPC health answers once one worker serves; GET /health says 200 once all do, so every connection opened
    after it can land on any of them."""
    url = f"http://{stack.host}:{stack.ports.verifier_http}/health"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as reply:
                if reply.status == 200:
                    return
        except OSError:  # 503 (HTTPError) while workers start, or not listening yet
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every Verifier worker serves after {timeout_s:.0f}s")
        time.sleep(0.25)


def goals(figures: dict) -> dict:
    """Each goal of issue 13 with the measured figure and whether it is met."""
    met = {">=": lambda value, goal: value >= goal, "<=": lambda value, goal: value <= goal}
    return {
        key: {"goal": f"{op} {goal:g}", "measured": figures[key], "passed": met[op](figures[key], goal)}
        for key, (op, goal) in GOALS.items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drafts", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=0, help="Verifier processes, second setup; 0: one per core")
    parser.add_argument("--channels", type=int, default=8, help="client connections of the second setup")
    args = parser.parse_args(argv)
    workers = args.workers or len(os.sched_getaffinity(0))
    figures = in_process(args.drafts)
    print(json.dumps(figures, indent=2))
    with verifier(1) as address:
        one = asyncio.run(python_client_calls(address, args.seconds, 1))
    print(f"gRPC, 1 process, 1 connection, Python client: {one} VerifyDrafts calls/s ({DRAFTS_PER_CALL} drafts each)")
    with tempfile.TemporaryDirectory() as build_dir:
        go_binary = go_load_generator(Path(build_dir))
        with verifier(workers) as address:
            many = asyncio.run(python_client_calls(address, args.seconds, args.channels))
            print(f"gRPC, {workers} processes, {args.channels} connections, Python client: {many} calls/s")
            go = go_client_calls(go_binary, address, args.seconds, args.channels) if go_binary else None
    figures.update(
        grpc_calls_per_s=round(go["calls_per_s"]) if go else many,
        grpc_load_generator="go" if go else "python",
        grpc_workers=workers,
        grpc_channels=args.channels,
        grpc_calls_per_s_python_client=many,
        grpc_calls_per_s_one_process=one,
        grpc_drafts_per_call=DRAFTS_PER_CALL,
        grpc_in_flight=IN_FLIGHT,
    )
    if go:
        # The client's share of the 2 cores: what the server did not get.
        figures["grpc_go_client_cpu_share"] = round(go["client_cpu_s"] / go["seconds"], 3)
        print(f"gRPC, {workers} processes, {args.channels} connections, Go client: {figures['grpc_calls_per_s']} "
              f"calls/s, the client using {figures['grpc_go_client_cpu_share']:.2f} of a core")  # fmt: skip
    figures["goals"] = goals(figures)
    for key, goal in figures["goals"].items():
        print(f"{key}: {goal['measured']} ({goal['goal']}) {'passed' if goal['passed'] else 'FAILED'}")
    print(f"wrote {write_result('verifier', figures)}")


if __name__ == "__main__":
    main()
