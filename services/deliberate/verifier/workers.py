"""`--workers N`: N Verifier processes serving one gRPC port, watched by the process that started them.

One Python process verifies on one core; where the Verifier is the limit, N workers use N. Each worker is a whole
Verifier (`service.serve`): its own servicer, compiled-rule cache, judge and reference-store connection. They bind
the port with SO_REUSEPORT, so the kernel hands each new connection to one of them; a connection, and so a client
channel, stays with its worker.

This process serves the HTTP `GET /health` (200 once every worker serves, 503 otherwise) and nothing else. It ends
as one Verifier: SIGTERM or SIGINT are passed on to the workers, which drain as a single Verifier does; a worker
that exits unexpectedly stops the others and this process exits 1, so whatever restarts the Verifier (the
Scheduler's watchdog, compose, Kubernetes) restarts all of it. Workers stay in this process's group, which is what
the watchdog's `process` restarter signals; a worker whose parent was killed outright stops itself.

Only the first worker serves `/metrics` on --metrics-port (two cannot share it); the others' instruments count
without being exported.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time

from ..core.config import parse_settings
from ..core.http_health import HttpHealthEndpoint
from ..core.logs import setup_logging
from .service import health_state, rule_pack_names, serve
from .settings import VerifierSettings

log = logging.getLogger("deliberate.verifier.workers")

# How often the parent looks for a worker that exited.
POLL_S = 0.5
# Beyond the workers' own drain (--shutdown-grace-s): starting up, closing a judge.
EXIT_MARGIN_S = 10.0


def run_workers(argv: list[str], settings: VerifierSettings) -> int:
    """Starts the workers and watches them until a signal or a worker's exit; the process's exit code."""
    setup_logging("verifier", settings.log_level)
    count = settings.worker_count
    spawn = multiprocessing.get_context("spawn")  # no threads or gRPC state carried into a fork
    serving = spawn.Array("b", count, lock=False)  # one flag per worker, written by that worker only
    workers = [
        spawn.Process(target=worker_main, args=(argv, index, serving), name=f"verifier-worker-{index}")
        for index in range(count)
    ]
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    for worker in workers:
        worker.start()

    state = health_state(settings)
    state["rule_packs"] = rule_pack_names()  # what every worker loads

    def describe() -> dict:
        ready = sum(serving)
        return {"service": "verifier", **state, "serving": ready == count, "workers": count, "workers_serving": ready}

    http_health = HttpHealthEndpoint(settings.host, settings.http_port, describe)
    http_health.start()
    log.info("workers started", extra={"workers": count, "pids": [w.pid for w in workers]})
    code = 0
    try:
        while not stop.wait(POLL_S):
            exited = next((w for w in workers if not w.is_alive()), None)
            if exited is not None:
                if not stop.is_set():  # not one draining after a signal
                    details = {"worker": exited.name, "exit_code": exited.exitcode}
                    log.error("worker exited; stopping the Verifier", extra=details)
                    code = 1
                break
    finally:
        http_health.stop()
        stop_workers(workers, settings.shutdown_grace_s + EXIT_MARGIN_S)
    return code


def stop_workers(workers: list, grace_s: float) -> None:
    """SIGTERM (each drains its calls), SIGKILL whatever is left after `grace_s`."""
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    for worker in workers:
        worker.join(grace_s)
        if worker.is_alive():
            worker.kill()
            worker.join()


def worker_main(argv: list[str], index: int, serving) -> None:
    settings = parse_settings(VerifierSettings, argv, prog="deliberate.verifier")
    threading.Thread(target=drain_when_orphaned, args=(os.getppid(),), name="parent-watch", daemon=True).start()
    if index > 0:
        settings = settings.model_copy(update={"metrics_port": 0})

    def report(now_serving: bool) -> None:
        serving[index] = now_serving

    serve(settings, health_state(settings), on_serving=report)


def drain_when_orphaned(parent: int) -> None:
    """A parent killed outright (SIGKILL) cannot stop its workers: each then stops itself, as on SIGTERM, rather
    than keep the port with nothing watching it."""
    while os.getppid() == parent:
        time.sleep(POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)
