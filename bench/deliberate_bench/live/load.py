"""Load: goodput as clients multiply — the default round, a round of 5 and a plain single-program server, side by side
on the same stack and the same cores.

    deliberate bench load [--levels 1,2,4,8,16] [--duration 180] [--deadline 60] [--configs ...] [--quick]

A closed loop per level: `clients` threads, each sending the next request — a GSM8K tuning problem (a fixed sample of
the first tuning block; never a scored problem), or one time in five a business decision of the business tuning
split (`--business-share`, load_items.py) — as soon as its last one ended, for `--duration` seconds; then no new
request, and those in flight end by their deadline. Every request carries the deadline (the gRPC timeout, which the
Scheduler reads as the request's). Configurations (`--configs`):

    default         the Scheduler's default round (the cascade), nothing set but the deadline
    round5          5 drafts all at once (DRAFT_COUNT_ALL_AT_ONCE), the round before the cascade
    gateway         the default round through the OpenAI-compatible gateway (HTTP; load_gateway.py)
    single-program  what a user would run instead: the same Drafter (same engine, same llama.cpp core) asked for one
                    greedy program per request, no Scheduler or Verifier; its program is run in this process's
                    sandbox (milliseconds) and its printed number is the answer — `deliberate bench eval`'s
                    single:program row, under load

Per level and configuration: throughput (requests answered per minute), **goodput** (right answers within the deadline
per minute), p50/p95/p99 latency of admitted requests, refusals (`RESOURCE_EXHAUSTED`; the client waits the
`retry-after-ms` hint and sends the same problem once more with the refusal's retry ticket, and whether that retry
was admitted is counted), deadlines exceeded, lost (no reply by the deadline + 5 s), and the drafts per request the
round started. A minute here is the level's wall time, from its first request to the end of its last.

Writes load.{json,md,png} in bench/studies/load-and-soak/ (load-quick.* with --quick: SmolLM2-135M, 1 and 2 clients,
30 s, the default
against the single-program server — a check that the machinery works, not a curve).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import grpc

from deliberate.cli.stack import Ports, Stack
from deliberate.core.admission import TICKET_KEY, TICKET_WANTED, retry_after_ms, retry_ticket
from deliberate.engines.models import DEFAULT_EMBEDDED
from deliberate_api.drafter.v1.drafter_service_pb2 import GetLoadRequest
from deliberate_bench.eval.calls import Settings, single_pass
from deliberate_bench.eval.problems import DEFAULT_SEED, TUNING_BLOCK_FILES, Problem, load_problems, read_exclusions
from deliberate_bench.eval.services import Services
from deliberate_bench.eval.stats import percentile
from deliberate_bench.inputs import SAMPLE_GSM8K, SHARED_GSM8K
from deliberate_bench.live.load_gateway import through_gateway
from deliberate_bench.live.load_items import Item, items, single_decision_program
from deliberate_bench.live.load_stages import request_id, stage_figures, stage_table
from deliberate_bench.results import LAB_FILES, code_version, write_result
from deliberate_client.client import build_request

LOST_AFTER_S = 5.0  # past the deadline, as the soak counts it
CONFIGS = ("default", "round5", "gateway", "single-program")
PROBLEMS = 50
BUSINESS_SHARE = 0.2  # one request in 5 a business decision (load_items), the rest GSM8K


@dataclass
class Call:
    problem: str
    started: float
    ended: float | None = None
    code: str = ""  # the gRPC status name
    right: bool = False
    drafts: int = 0
    refused: bool = False  # the first try was refused with RESOURCE_EXHAUSTED
    hinted: bool = False  # ... and carried a retry-after-ms hint
    retry_admitted: bool | None = None  # the retry after the hint: admitted (any status but RESOURCE_EXHAUSTED)
    ticket: str = ""  # the place the refusal held for the retry (core/admission.py), sent back with it
    request_id: str = ""  # its spans' `deliberate.request_id` (load_stages)
    business: bool = False  # a business decision (right: a feasible plan), not a GSM8K problem

    @property
    def latency(self) -> float | None:
        return None if self.ended is None else self.ended - self.started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="SmolLM2-135M, 1 and 2 clients, 30 s, load-quick.*")
    parser.add_argument("--levels", help="concurrent clients per level (default 1,2,4,8,16; 1,2 with --quick)")
    parser.add_argument("--duration", type=float, help="seconds of new requests per level (default 180; 30 quick)")
    parser.add_argument("--deadline", type=float, default=60.0, help="each request's deadline, seconds")
    parser.add_argument("--configs", help=f"comma list of {', '.join(CONFIGS)} (default all; quick: default and "
                        "single-program)")  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int, help="draft budget (default 384; 48 with --quick)")
    parser.add_argument("--business-share", type=float, help=f"share of business decisions (default {BUSINESS_SHARE}; "
                        "0 with --quick)")  # fmt: skip
    parser.add_argument("--name", help="results name (default load, or load-quick)")
    args = parser.parse_args(argv)
    if args.quick:  # read by the stack's services when they start
        os.environ.setdefault("DELIBERATE_MODEL", "smollm2-135m")
    levels = [int(n) for n in (args.levels or ("1,2" if args.quick else "1,2,4,8,16")).split(",")]
    duration = args.duration or (30.0 if args.quick else 180.0)
    configs = (args.configs or ("default,single-program" if args.quick else ",".join(CONFIGS))).split(",")
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        parser.error(f"--configs: unknown {sorted(unknown)}")
    max_new_tokens = args.max_new_tokens or (48 if args.quick else 384)
    name = args.name or ("load-quick" if args.quick else "load")
    code_version()  # the commit the stack starts at, kept for the result (a run outlasts commits)
    problems = tuning_problems(PROBLEMS)
    share = args.business_share if args.business_share is not None else (0.0 if args.quick else BUSINESS_SHARE)
    sent = items(problems, share)

    log_dir = Path(tempfile.mkdtemp(prefix="deliberate-load-"))
    print(f"load: levels {levels}, {duration:.0f} s each, deadline {args.deadline:.0f} s, configs {configs}, "
          f"model {os.environ.get('DELIBERATE_MODEL', 'the default')}; logs in {log_dir}/", flush=True)  # fmt: skip
    trace_file = log_dir / "spans.jsonl"
    gateway = "gateway" in configs
    env = {"DELIBERATE_REQUEST_TIMEOUT_S": str(args.deadline)} if gateway else {}  # the gateway's deadline
    stack = Stack(ports=Ports.free(), log_dir=log_dir, state_dir=log_dir, with_gateway=gateway, trace_file=trace_file,
                  env=env)  # fmt: skip
    with stack:
        sender = Sender(stack, args.deadline, max_new_tokens)
        sender.warm_up(sent[0], configs)
        results = []
        for config in configs:
            points = []
            for clients in levels:
                calls, queue = run_level(sender, config, clients, duration, sent)
                points.append(point(calls, clients, args.deadline) | queue_figures(queue))
                print(f"  {config:15} {clients:3} clients: {summary_line(points[-1])}", flush=True)
            results.append({"name": config, "points": points})
    for result in results:  # the services have stopped: every span is in the file
        for p in result["points"]:
            p.update(stage_figures(trace_file, f"{result['name']}-c{p['clients']}"))
    figures = {
        "question": "right answers within the deadline per minute as concurrent clients multiply, on 2 cores",
        "levels": levels,
        "duration_s": duration,
        "deadline_s": args.deadline,
        "lost_after_deadline_s": LOST_AFTER_S,
        "max_new_tokens": max_new_tokens,
        "model": os.environ.get("DELIBERATE_MODEL", DEFAULT_EMBEDDED),
        "problems": f"{len(problems)} GSM8K tuning problems (first tuning block, seed {DEFAULT_SEED}), in turn"
        + (
            f", and one request in {round(1 / share)} a business decision of the tuning split (right: feasible)"
            if share
            else ""
        ),  # fmt: skip
        "business_share": share,
        "command": "deliberate bench load" + (" --quick" if args.quick else ""),
        "configs": results,
        "ratios": goodput_ratios(results),
    }
    figures["failures"] = failures(results)
    path = write_result(name, figures)
    (LAB_FILES / f"{name}.md").write_text(markdown(figures))
    plot(figures, LAB_FILES / f"{name}.png")
    print(f"wrote {path}")
    for failure in figures["failures"]:
        print(f"FAIL  {failure}")
    return 1 if figures["failures"] else 0


def tuning_problems(limit: int) -> list[Problem]:
    """The first `limit` of the first tuning block's sample (the shared split), else of the tests' sample."""
    if SHARED_GSM8K.exists():
        return load_problems(SHARED_GSM8K, limit, DEFAULT_SEED, read_exclusions(TUNING_BLOCK_FILES[0]))
    return load_problems(SAMPLE_GSM8K, limit, DEFAULT_SEED, set())


class Sender:
    """One request of a configuration, timed and judged; thread-safe (gRPC channels are)."""

    def __init__(self, stack, deadline: float, max_new_tokens: int):
        self.deadline = deadline
        self.numbers = itertools.count()  # each request's own number, for its id
        self.gateway_url = stack.gateway_url
        self.services = Services(stack.address, stack.address_of("drafter"), stack.address_of("refiner"))
        self.settings = Settings(sizes=[5], max_new_tokens=max_new_tokens, refine_max_new_tokens=None,
                                 temperature=None, seed=0, check_arithmetic=True, refine_subsets=False,
                                 ads_catalog_size=0, timeout_s=deadline, engine="", model="")  # fmt: skip

    def warm_up(self, item: Item, configs: list[str]) -> None:
        """One request of each configuration before any clock: the first pays for cold caches."""
        for config in configs:
            self.send(config, item, time.monotonic(), f"{config}-warm-up")

    def send(self, config: str, item: Item, begun: float, tag: str) -> Call:
        """One request; refused with a hint, it waits the hint and is sent once more within its first deadline (the
        request's deadline is one instant, however many tries)."""
        call = Call(item.id, started=time.monotonic() - begun, business=item.instance is not None)
        call.request_id = request_id(tag, next(self.numbers), item.id)
        self.attempt(call, config, item, self.deadline)
        left = self.deadline - (time.monotonic() - begun - call.started)
        if call.code == "RESOURCE_EXHAUSTED" and call.hinted:
            retried = Call(item.id, started=call.started, refused=True, hinted=True, request_id=call.request_id,
                           business=call.business)  # fmt: skip
            if left > 0:
                self.attempt(retried, config, item, left, ticket=call.ticket)
                retried.retry_admitted = retried.code != "RESOURCE_EXHAUSTED"
            else:
                retried.code = "DEADLINE_EXCEEDED"  # the hint outlasted the deadline: not sent again
            call = retried
        call.ended = time.monotonic() - begun
        return call

    def attempt(self, call: Call, config: str, item: Item, timeout: float, ticket: str = "") -> None:
        if config == "single-program":
            self.single_program(call, item, timeout)
        elif config == "gateway":
            through_gateway(self.gateway_url, call, item, self.settings.max_new_tokens, timeout)
        else:
            self.solve(call, config, item, timeout, ticket)

    def solve(self, call: Call, config: str, item: Item, timeout: float, ticket: str = "") -> None:
        """One Solve; a retry sends back the ticket its refusal carried (the place held for it)."""
        round_of_5 = {"num_drafts": 5, "draft_count": "all_at_once"} if config == "round5" else {}
        request = build_request(item.prompt, max_new_tokens=self.settings.max_new_tokens, request_id=call.request_id,
                                **item.request, **round_of_5)  # fmt: skip
        metadata = ((TICKET_KEY, ticket or TICKET_WANTED),)  # a first try asks for a ticket, a retry sends its own
        try:
            response = self.services.scheduler.Solve(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as error:
            call.code = error.code().name
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                hint = retry_after_ms(error.trailing_metadata())
                call.refused, call.hinted = True, hint is not None
                call.ticket = retry_ticket(error.trailing_metadata())
                if hint is not None:
                    time.sleep(hint / 1000)
            return
        call.code = "OK"
        call.right = item.right(response.answer)
        call.drafts = response.round_plan.drafts_started or response.num_drafts

    def single_program(self, call: Call, item: Item, timeout: float) -> None:
        """One greedy program from the Drafter (a decision program for a business request); refused (its bound: the
        plain server's own), it waits the hint as a Solve's client does."""
        if item.instance is not None:
            call.code, plan = single_decision_program(self.services.drafter, item.instance, call.request_id,
                                                      self.settings.max_new_tokens, timeout)  # fmt: skip
            call.right, call.drafts = call.code == "OK" and item.right(plan), 1
            return
        settings = replace(self.settings, timeout_s=timeout)
        done = single_pass(self.services, settings, call.request_id, item.prompt, program=True)
        error = done.get("error")
        call.code = error.split(":", 1)[0] if error else "OK"
        if call.code == "RESOURCE_EXHAUSTED":
            hint = done.get("retry_after_ms")
            call.refused, call.hinted = True, hint is not None
            if hint is not None:
                time.sleep(hint / 1000)
            return
        call.right = not error and item.right(done["answer"])
        call.drafts = 1


def run_level(
    sender: Sender, config: str, clients: int, duration: float, sent: list[Item]
) -> tuple[list[Call], list[int]]:
    """`clients` closed-loop clients for `duration` seconds; returns every call once all have ended, and the
    Drafter's queue (sequences waiting for an engine slot) sampled each second meanwhile."""
    begun = time.monotonic()
    numbers = itertools.count()
    calls: list[Call] = []
    lock = threading.Lock()

    def client() -> None:
        while time.monotonic() - begun < duration:
            with lock:
                item = sent[next(numbers) % len(sent)]
            call = sender.send(config, item, begun, f"{config}-c{clients}")
            with lock:
                calls.append(call)

    queue: list[int] = []
    ended = threading.Event()

    def sample_queue() -> None:
        while not ended.wait(1.0):
            with contextlib.suppress(grpc.RpcError):
                queue.append(sender.services.drafter.GetLoad(GetLoadRequest(), timeout=2).queued_sequences)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    sampler = threading.Thread(target=sample_queue, daemon=True)
    for thread in [*threads, sampler]:
        thread.start()
    for thread in threads:  # a call ends by its deadline (gRPC's timeout): a thread still alive after that is lost
        thread.join(max(0.0, begun + duration + 2 * (sender.deadline + LOST_AFTER_S) - time.monotonic()))
    ended.set()
    lost = sum(thread.is_alive() for thread in threads)
    return calls + [Call("lost", started=duration, code="LOST") for _ in range(lost)], queue


def point(calls: list[Call], clients: int, deadline: float) -> dict:
    """One level's figures."""
    ended = [c for c in calls if c.ended is not None]
    minutes = max([c.ended for c in ended] + [1.0]) / 60
    admitted = [c for c in ended if c.code != "RESOURCE_EXHAUSTED"]
    latencies = sorted(c.latency for c in admitted if c.latency is not None)
    answered = [c for c in ended if c.code == "OK"]
    good = [c for c in answered if c.right and c.latency <= deadline]
    retries = [c.retry_admitted for c in ended if c.retry_admitted is not None]
    lost = [c for c in calls if c.code == "LOST" or (c.latency or 0) > deadline + LOST_AFTER_S]

    def pct(q: float) -> float | None:
        return round(percentile(latencies, q / 100), 2) if latencies else None

    return {
        "clients": clients,
        "requests": len(calls),
        "answered": len(answered),
        "right": sum(c.right for c in answered),
        "business_answered": sum(c.business for c in answered),  # of them business decisions, right when feasible
        "business_right": sum(c.business and c.right for c in answered),
        "throughput_per_min": round(len(answered) / minutes, 2),
        "goodput_per_min": round(len(good) / minutes, 2),
        "p50_s": pct(50),
        "p95_s": pct(95),
        "p99_s": pct(99),
        "refused": sum(c.refused for c in calls),
        "refused_at_last": sum(c.code == "RESOURCE_EXHAUSTED" for c in calls),  # its retry refused, or none sent
        "refused_with_hint": sum(c.hinted for c in calls),
        "retries_admitted": sum(retries),
        "retries": len(retries),
        "deadline_exceeded": sum(c.code == "DEADLINE_EXCEEDED" for c in calls),
        "other_errors": sum(c.code not in ("OK", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "LOST") for c in calls),
        "lost": len(lost),
        "drafts_mean": round(sum(c.drafts for c in answered) / len(answered), 2) if answered else None,
        "minutes": round(minutes, 2),
    }


def queue_figures(queue: list[int]) -> dict:
    """The Drafter's queue over a level: sequences waiting for one of its engine slots."""
    return {
        "drafter_queue_mean": round(sum(queue) / len(queue), 2) if queue else None,
        "drafter_queue_max": max(queue) if queue else None,
    }


def failures(configs: list[dict]) -> list[str]:
    """What must hold at every level whatever the load: nothing lost, no status but OK, DEADLINE_EXCEEDED and a
    hinted RESOURCE_EXHAUSTED, and some request answered."""
    found = []
    for config in configs:
        for p in config["points"]:
            where = f"{config['name']} at {p['clients']} clients"
            if p["lost"]:
                found.append(f"{where}: {p['lost']} lost")
            if p["other_errors"] or p["refused"] > p["refused_with_hint"]:
                found.append(f"{where}: {p['other_errors']} other errors, {p['refused'] - p['refused_with_hint']} "
                             "refusals without a retry hint")  # fmt: skip
            if not p["answered"]:
                found.append(f"{where}: nothing answered")
            if p.get("refused_at_last", 0) > p["refused"]:
                found.append(f"{where}: {p['refused_at_last'] - p['refused']} refusals not counted as refusals")
    return found


def goodput_ratios(configs: list[dict]) -> list[dict]:
    """Each configuration's goodput over the single-program server's, level by level."""
    by_name = {c["name"]: {p["clients"]: p for p in c["points"]} for c in configs}
    baseline = by_name.get("single-program")
    if not baseline:
        return []
    return [
        {"config": name, "clients": clients, "goodput_ratio": round(p["goodput_per_min"] / base, 2) if base else None}
        for name, points in by_name.items()
        if name != "single-program"
        for clients, p in points.items()
        if clients in baseline and (base := baseline[clients]["goodput_per_min"]) is not None
    ]


def summary_line(p: dict) -> str:
    return (f"goodput {p['goodput_per_min']}/min, throughput {p['throughput_per_min']}/min, p50 {p['p50_s']} s, "
            f"p95 {p['p95_s']} s, refused {p['refused']}, deadline exceeded {p['deadline_exceeded']}, "
            f"lost {p['lost']}, drafts {p['drafts_mean']}, Drafter queue {p.get('drafter_queue_mean')}")  # fmt: skip


def markdown(figures: dict) -> str:
    lines = [
        f"# {figures['command']}",
        "",
        f"{figures['question'].capitalize()}: {figures['model']}, deadline {figures['deadline_s']:g} s, "
        f"{figures['duration_s']:g} s of new requests per level, {figures['problems']}.",
        "",
        "| config | clients | goodput /min | throughput /min | right/answered | p50 s | p95 s | p99 s | refused "
        "(retries admitted) | deadline exceeded | lost | drafts | Drafter queue mean / max |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for config in figures["configs"]:
        for p in config["points"]:
            lines.append(
                f"| {config['name']} | {p['clients']} | {p['goodput_per_min']} | {p['throughput_per_min']} | "
                f"{p['right']}/{p['answered']}{business_part(p)} | {p['p50_s']} | {p['p95_s']} | {p['p99_s']} | "
                f"{p['refused']} ({p['retries_admitted']}/{p['retries']}) | {p['deadline_exceeded']} | {p['lost']} | "
                f"{p['drafts_mean']} | {p.get('drafter_queue_mean')} / {p.get('drafter_queue_max')} |"
            )
    lines += stage_table(figures["configs"])
    if figures["ratios"]:
        lines += ["", "| config | clients | goodput ÷ single-program |", "|---|---|---|"]
        for r in figures["ratios"]:
            ratio = r["goodput_ratio"] if r["goodput_ratio"] is not None else "n/a (no right answer to divide by)"
            lines.append(f"| {r['config']} | {r['clients']} | {ratio} |")
    return "\n".join(lines) + "\n"


def business_part(p: dict) -> str:
    """` (business 3/5)`: the right (feasible) and answered business decisions among a level's answers."""
    return f" (business {p['business_right']}/{p['business_answered']})" if p.get("business_answered") else ""


def plot(figures: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (good, tail) = plt.subplots(1, 2, figsize=(10, 4))
    for config in figures["configs"]:
        clients = [p["clients"] for p in config["points"]]
        good.plot(clients, [p["goodput_per_min"] for p in config["points"]], marker="o", label=config["name"])
        tail.plot(clients, [p["p95_s"] for p in config["points"]], marker="o", label=config["name"])
    tail.axhline(figures["deadline_s"], color="grey", linestyle="--", label="deadline")
    for ax, label in ((good, "right answers within the deadline / min"), (tail, "p95 latency of admitted, s")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel(label)
        ax.legend()
    fig.suptitle(f"{figures['command']} ({figures['model']}, 2 cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
