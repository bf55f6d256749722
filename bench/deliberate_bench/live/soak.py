"""Soak: the real stack under steady load for a bounded time while faults are injected on a schedule.

    deliberate bench soak [--duration 900] [--concurrency 8] [--deadline 120] [--quick]

Starts the four services on free ports (the model DELIBERATE_MODEL names, smollm2-135m unless set; the Scheduler's
watchdog on a 2 s heartbeat; `deliberate up`'s Supervisor restarting Drafter, Refiner and Scheduler) and keeps
`--concurrency` solves in flight (2 drafts, 24 new tokens, one drafting round: re-drafting is off, since the small
model gets most sums wrong and each re-draft round would multiply a request's cost; the soak measures what faults do
to requests, not answers) until `--duration` has passed. Each request has a 120 s deadline: on 2 cores the Drafter and
the Refiner share the CPU, and 8 solves in flight take ~50 s each (prompt evaluation of 16 drafts and 8 refinements),
so a 60 s deadline would measure the machine's throughput, not the faults. `--quick` keeps 2 in flight, so that
requests fit between its faults, 36 s apart, on a slower machine too (with 4 in flight, CI's recovery requests
took 71 s at the median and one passed the deadline; the same run here took 10 s). Faults are spread evenly
over the run, after a fault-free steady start; the first waits (at most one deadline more, the rest moving with it)
until `--concurrency` requests (at least 4) have ended, so the steady phase has requests to judge on a slower
machine, and the end waits the same way until as many have ended in the recovery phase:

    full (make soak, 15 min):       5 Verifier SIGKILLs, 2 Verifier SIGSTOPs, 1 Drafter SIGKILL, 1 Refiner SIGKILL
    quick (make soak-quick, 3 min): 1 of each kind

A SIGSTOPped Verifier is left stopped: its health checks time out, and after 3 failed heartbeats the watchdog's
process restarter SIGTERMs it, SIGKILLs it 2 s later (a stopped process cannot act on SIGTERM) and starts another.
A fault window runs from the injection until the stack is healthy again: the faulted process replaced, all four
services SERVING and the Scheduler's watchdog seeing the Verifier healthy. Each request is classed by phase:
`fault` if it overlaps a window, `steady` if it started before the first fault, else `recovery`.
One solve warms the stack up before the clock starts; a worker pauses 1 s after an error, as a retrying client would.
A request with no reply by its deadline + 5 s is `lost`. Pass: lost == 0 and >= 95 % OK in steady and recovery.

Writes bench/studies/load-and-soak/soak.json (soak-quick.json with --quick) and exits 1 when the criteria fail.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from deliberate_bench.results import write_result

os.environ.setdefault("DELIBERATE_MODEL", "smollm2-135m")

import grpc

from deliberate.cli.stack import Ports, Stack
from deliberate.cli.supervisor import CrashLoop, Supervisor
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

FULL_FAULTS = ["verifier_kill", "verifier_stop", "drafter_kill", "verifier_kill", "refiner_kill"]
FULL_FAULTS += ["verifier_kill", "verifier_stop", "verifier_kill", "verifier_kill"]
QUICK_FAULTS = ["verifier_kill", "drafter_kill", "verifier_stop", "refiner_kill"]
LOST_AFTER_S = 5.0  # past the deadline
MIN_JUDGED = 4  # requests the steady and recovery phases wait for, however few are in flight
# A worker that got an error waits this long before its next request, as a retrying client would; without it a
# down Drafter turns each worker into a loop of instant UNAVAILABLEs that only measures how fast those are.
PAUSE_AFTER_ERROR_S = 1.0
OK_FRACTION = 0.95


@dataclass
class Outcome:
    started: float  # seconds since the run began
    ended: float | None  # None: still without a reply when the run ended
    code: str  # a gRPC status code name; OK for an answer
    status: str = ""  # the answer's SolveStatus
    phase: str = ""


@dataclass
class FaultWindow:
    fault: str
    injected: float
    healthy: float | None = None  # None: not healthy again within the recovery limit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 min, one fault of each kind, soak-quick.json")
    parser.add_argument("--duration", type=float, help="seconds of load (default 900; 180 with --quick)")
    parser.add_argument("--concurrency", type=int, help="solves in flight (default 8; 2 with --quick)")
    parser.add_argument("--deadline", type=float, default=120.0, help="each request's gRPC deadline, seconds")
    parser.add_argument("--heartbeat", type=float, default=2.0, help="the watchdog's heartbeat, seconds")
    parser.add_argument("--drafts", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--max-redrafts", type=int, default=0, help="the Scheduler's re-drafting rounds")
    args = parser.parse_args(argv)
    duration = args.duration or (180.0 if args.quick else 900.0)
    args.concurrency = args.concurrency or (2 if args.quick else 8)
    faults = QUICK_FAULTS if args.quick else FULL_FAULTS
    name = "soak-quick" if args.quick else "soak"
    # Evenly spaced, with a fault-free stretch first (the steady phase) and one last (recovery).
    schedule = [duration * (i + 1) / (len(faults) + 1) for i in range(len(faults))]
    settings = {
        "duration_s": duration,
        "concurrency": args.concurrency,
        "deadline_s": args.deadline,
        "lost_after_deadline_s": LOST_AFTER_S,
        "pause_after_error_s": PAUSE_AFTER_ERROR_S,
        "watchdog_heartbeat_s": args.heartbeat,
        "num_drafts": args.drafts,
        "max_new_tokens": args.max_new_tokens,
        "max_redrafts": args.max_redrafts,
        "model": os.environ["DELIBERATE_MODEL"],
        "faults": [{"fault": f, "at_s": round(t, 1)} for f, t in zip(faults, schedule, strict=True)],
    }
    print(f"soak: {duration:.0f}s, concurrency {args.concurrency}, deadline {args.deadline:.0f}s, "
          f"watchdog heartbeat {args.heartbeat:g}s, model {settings['model']}", flush=True)  # fmt: skip

    log_dir = Path(tempfile.mkdtemp(prefix="deliberate-soak-"))
    stack = Stack(
        ports=Ports.free(),
        log_dir=log_dir,
        state_dir=log_dir,
        with_gateway=False,
        scheduler_args=["--watchdog-interval-s", str(args.heartbeat), "--max-redrafts", str(args.max_redrafts)],
    )
    supervisor = Supervisor(stack, log=lambda line: print(f"[supervisor] {line}", flush=True))
    with stack:
        print(f"stack up (logs in {log_dir}/)", flush=True)
        soak = Soak(stack, supervisor, args, duration)
        soak.warm_up()
        rss_start = soak.rss()
        soak.run(faults, schedule)
        rss_end = soak.rss()
    return report(name, settings, soak, rss_start, rss_end, log_dir)


class Soak:
    def __init__(self, stack: Stack, supervisor: Supervisor, args: argparse.Namespace, duration: float):
        self.stack, self.supervisor, self.args, self.duration = stack, supervisor, args, duration
        self.begun = time.monotonic()
        self.outcomes: list[Outcome] = []
        self.windows: list[FaultWindow] = []
        self.numbers = itertools.count(1)
        self.stopping = threading.Event()  # no new requests
        self.done = threading.Event()  # the supervisor stops too
        self.crash_loop = ""

    def now(self) -> float:
        return time.monotonic() - self.begun

    def warm_up(self) -> None:
        """One solve before the clock starts: the first request pays for cold caches, not for the stack's health."""
        with DeliberateClient(self.stack.address) as client:
            client.solve(self.request(0), timeout=self.args.deadline * 3)

    def request(self, n: int) -> pb.SolveRequest:
        request = build_request(
            f"What is {17 + n % 83} + {n % 41}?",
            num_drafts=self.args.drafts,
            max_new_tokens=self.args.max_new_tokens,
            refine_max_new_tokens=self.args.max_new_tokens,
        )
        # Refined, so every solve needs all four services and the Refiner's fault meets requests (the deployed
        # default passes the best draft through and calls no Refiner).
        request.final_text = pb.FINAL_TEXT_REFINE
        return request

    def run(self, faults: list[str], schedule: list[float]) -> None:
        self.begun = time.monotonic()
        supervising = threading.Thread(target=self.supervise, daemon=True)
        supervising.start()
        workers = [threading.Thread(target=self.ask_until_done, daemon=True) for _ in range(self.args.concurrency)]
        for worker in workers:
            worker.start()
        shift = self.wait_for_steady_requests(schedule[0]) if schedule else 0.0
        for fault, at in zip(faults, schedule, strict=True):
            time.sleep(max(0.0, at + shift - self.now()))
            self.inject(fault)
        time.sleep(max(0.0, self.duration + shift - self.now()))
        self.wait_for_recovery_requests()
        # No new requests; those in flight get their deadline plus the grace, then count as lost.
        self.stopping.set()
        until = time.monotonic() + self.args.deadline + LOST_AFTER_S
        for worker in workers:
            worker.join(max(0.0, until - time.monotonic()))
        self.done.set()
        supervising.join(5)

    def wait_for_steady_requests(self, first_fault_at: float) -> float:
        """Hold the first fault until `concurrency` requests have ended in the steady phase, so that the steady
        criterion judges requests even where solves are slower than the planned steady stretch; returns by how much
        the whole schedule moves."""
        time.sleep(max(0.0, first_fault_at - self.now()))
        return self.hold_for_requests("steady", first_fault_at, "faults start")

    def wait_for_recovery_requests(self) -> None:
        """Hold the end until `concurrency` requests have ended in the recovery phase, so that the recovery criterion
        judges requests even where every request of the planned run overlapped a fault window."""
        if self.windows:
            self.hold_for_requests("recovery", self.now(), "load ends")

    def hold_for_requests(self, phase: str, planned: float, what: str) -> float:
        """Wait from `planned` (at most one deadline) until `concurrency` requests (at least MIN_JUDGED) have ended
        in `phase`; returns how late `what` happens."""
        until = planned + self.args.deadline
        while self.now() < until and self.ended_in(phase) < max(self.args.concurrency, MIN_JUDGED):
            time.sleep(0.25)
        late = self.now() - planned
        if late >= 1.0:
            print(f"[{self.now():6.1f}s] {what} {late:.0f}s late: the {phase} requests were slower", flush=True)
        return late

    def ended_in(self, phase: str) -> int:
        now = self.now()
        return sum(o.ended is not None and classify(o, self.windows, now) == phase for o in list(self.outcomes))

    def supervise(self) -> None:
        while not self.done.wait(0.2):
            try:
                self.supervisor.check()
            except CrashLoop as error:
                self.crash_loop = str(error)
                print(f"[supervisor] {error}", flush=True)
                return

    def ask_until_done(self) -> None:
        with DeliberateClient(self.stack.address) as client:
            while not self.stopping.is_set():
                request = self.request(next(self.numbers))
                outcome = Outcome(started=self.now(), ended=None, code="")
                self.outcomes.append(outcome)
                try:
                    reply = client.solve(request, timeout=self.args.deadline)
                    outcome.code, outcome.status = "OK", pb.SolveStatus.Name(reply.status)
                except grpc.RpcError as error:
                    outcome.code = error.code().name
                outcome.ended = self.now()
                if outcome.code != "OK":
                    self.stopping.wait(PAUSE_AFTER_ERROR_S)

    def inject(self, fault: str) -> None:
        service, action = fault.split("_")
        pid = self.stack.verifier_pid() if service == "verifier" else self.stack.processes[service].pid
        window = FaultWindow(fault, injected=self.now())
        self.windows.append(window)
        # The whole group: the service leads its own session, and a child it spawned would keep the port.
        os.killpg(pid, signal.SIGSTOP if action == "stop" else signal.SIGKILL)
        print(f"[{window.injected:6.1f}s] {fault} (pid {pid})", flush=True)
        window.healthy = self.wait_recovered(service, pid)
        took = f"healthy again after {window.healthy - window.injected:.1f}s" if window.healthy else "NOT healthy"
        print(f"[{self.now():6.1f}s] {fault}: {took}", flush=True)

    def wait_recovered(self, service: str, old_pid: int, limit_s: float = 120.0) -> float | None:
        until = time.monotonic() + limit_s
        while time.monotonic() < until:
            pid = self.stack.verifier_pid() if service == "verifier" else self.stack.processes[service].pid
            if pid not in (None, old_pid) and self.healthy():
                return self.now()
            time.sleep(0.25)
        return None

    def healthy(self) -> bool:
        if not all(self.stack.is_serving(s) for s in ("drafter", "verifier", "refiner", "scheduler")):
            return False
        try:
            with DeliberateClient(self.stack.address) as client:
                return client.stub.GetState(pb.GetStateRequest(), timeout=2).verifier.healthy
        except grpc.RpcError:
            return False

    def rss(self) -> dict[str, dict]:
        pids = {service: process.pid for service, process in self.stack.processes.items()}
        pids["verifier"] = self.stack.verifier_pid()
        return {service: {"pid": pid, "rss_mib": rss_mib(pid)} for service, pid in sorted(pids.items())}


def rss_mib(pid: int | None) -> float | None:
    """Resident memory in MiB (psutil where installed, else /proc); None for a process that is gone."""
    if pid is None:
        return None
    try:
        import psutil
    except ImportError:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        return round(kib / 1024, 1)
    try:
        return round(psutil.Process(pid).memory_info().rss / 2**20, 1)
    except psutil.Error:
        return None


def classify(outcome: Outcome, windows: list[FaultWindow], end: float) -> str:
    if not windows or outcome.ended is not None and outcome.ended < windows[0].injected:
        return "steady"
    ended = outcome.ended if outcome.ended is not None else end
    for window in windows:
        healthy = window.healthy if window.healthy is not None else end
        if outcome.started <= healthy and ended >= window.injected:
            return "fault"
    return "steady" if outcome.started < windows[0].injected else "recovery"


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)


def report(name: str, settings: dict, soak: Soak, rss_start: dict, rss_end: dict, log_dir: Path) -> int:
    end = soak.now()
    deadline = settings["deadline_s"]
    outcomes = list(soak.outcomes)
    lost = [o for o in outcomes if (o.ended if o.ended is not None else end) - o.started > deadline + LOST_AFTER_S]
    phases = {}
    for outcome in outcomes:
        outcome.phase = classify(outcome, soak.windows, end)
    for phase in ("steady", "fault", "recovery"):
        members = [o for o in outcomes if o.phase == phase]
        ok = [o.ended - o.started for o in members if o.code == "OK"]
        phases[phase] = {
            "requests": len(members),
            "ok": len(ok),
            "ok_fraction": round(len(ok) / len(members), 3) if members else None,
            "latency_p50_s": percentile(ok, 50),
            "latency_p99_s": percentile(ok, 99),
            "clear_status": dict(Counter(o.code or "NO_REPLY" for o in members)),
        }
    restarts = dict(soak.supervisor.restarts)
    restarts["verifier"] = verifier_restarts(log_dir / "scheduler.log")
    criteria = {
        "lost == 0": not lost,
        **{
            f"{phase} ok >= {OK_FRACTION:.0%}": (phases[phase]["ok_fraction"] or 0) >= OK_FRACTION
            for phase in ("steady", "recovery")
        },
        "every fault window closed": all(w.healthy is not None for w in soak.windows),
        "no crash loop": not soak.crash_loop,
    }
    figures = {
        "requests": len(outcomes),
        "ok": sum(o.code == "OK" for o in outcomes),
        "clear_status": dict(Counter(o.code or "NO_REPLY" for o in outcomes)),
        "answer_status": dict(Counter(o.status for o in outcomes if o.status)),
        "lost": len(lost),
        "phases": phases,
        "fault_windows": [
            {**asdict(w), "recovery_s": round(w.healthy - w.injected, 1) if w.healthy else None} for w in soak.windows
        ],
        "restarts": restarts,
        "rss_mib_start": rss_start,
        "rss_mib_end": rss_end,
        "criteria": criteria,
        "passed": all(criteria.values()),
        "crash_loop": soak.crash_loop or None,
        "settings": settings,
    }
    path = write_result(name, round_times(figures))
    print(json.dumps({k: figures[k] for k in ("requests", "ok", "clear_status", "lost", "restarts")}))
    for phase, figures_of in phases.items():
        print(f"{phase:<9} {figures_of}")
    for criterion, met in criteria.items():
        phase = criterion.split()[0]
        empty = phase in phases and not phases[phase]["requests"]
        print(f"{'PASS' if met else 'FAIL'}  {criterion}" + ("  (no request fell in this phase)" if empty else ""))
    print(f"wrote {path}")
    return 0 if figures["passed"] else 1


def verifier_restarts(scheduler_log: Path) -> int:
    """The watchdog's restarts, from the Scheduler's JSON log lines (they survive a Scheduler restart)."""
    count = 0
    for line in scheduler_log.read_text().splitlines():
        if line.startswith("{") and json.loads(line).get("msg") == "verifier restarted":
            count += 1
    return count


def round_times(figures: dict) -> dict:
    for window in figures["fault_windows"]:
        for key in ("injected", "healthy"):
            if window[key] is not None:
                window[key] = round(window[key], 1)
    return figures


if __name__ == "__main__":
    sys.exit(main())
