"""A stand-in Drafter replica for the balancing tests: it reports its health as NOT_SERVING (as a Drafter does while
it loads its model or drains) and records every call to the Drafter's service it receives, answering each with
UNAVAILABLE. SIGUSR1 turns its health to SERVING.

    python -m tests.standin_drafter PORT CALLS_FILE

Each received call appends its method name as one line to CALLS_FILE. A real process, so the Scheduler's channel
meets it over loopback exactly as it meets a real replica.
"""

from __future__ import annotations

import signal
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from deliberate_api.drafter.v1 import drafter_service_pb2

SERVICE = drafter_service_pb2.DESCRIPTOR.services_by_name["DrafterService"].full_name


class Recorder(grpc.GenericRpcHandler):
    def __init__(self, calls: Path):
        self.calls = calls
        self.lock = threading.Lock()

    def service(self, handler_call_details):
        method = handler_call_details.method
        if not method.startswith(f"/{SERVICE}/"):
            return None

        def answer(request, context):
            with self.lock, self.calls.open("a") as out:
                out.write(method.rsplit("/", 1)[1] + "\n")
            context.abort(grpc.StatusCode.UNAVAILABLE, "stand-in replica: not a Drafter")

        return grpc.unary_unary_rpc_method_handler(answer)


def main() -> None:
    port, calls = int(sys.argv[1]), Path(sys.argv[2])
    calls.touch()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers((Recorder(calls),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    for name in ("", SERVICE):
        servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

    def serving(*_: object) -> None:
        for name in ("", SERVICE):
            servicer.set(name, health_pb2.HealthCheckResponse.SERVING)

    signal.signal(signal.SIGUSR1, serving)
    server.start()
    print("listening", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
