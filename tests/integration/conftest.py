"""The four services as real OS processes on free loopback ports, exporting real OTLP spans to a
receiver that runs inside the test process."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from deliberate_client.stack import Ports, Stack

ROOT = Path(__file__).resolve().parents[2]
GSM8K = [ROOT.parent / "shared/data/gsm8k/train.jsonl", ROOT / "tests/data/gsm8k_sample.jsonl"]


def gsm8k_questions(count: int) -> list[dict]:
    path = next(p for p in GSM8K if p.exists())
    with path.open() as lines:
        return [json.loads(line) for _, line in zip(range(count), lines, strict=False)]


class OtlpReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace endpoint that keeps every span it receives, grouped by trace id."""

    def __init__(self):
        self.spans: dict[str, list[dict]] = defaultdict(list)
        self.lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def Export(self, request, context):  # noqa: N802 (gRPC naming)
        with self.lock:
            for resource_spans in request.resource_spans:
                service = next(
                    (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"),
                    "",
                )
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans[span.trace_id.hex()].append(
                            {
                                "service": service,
                                "name": span.name,
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                                "events": [e.name for e in span.events],
                            }
                        )
        return trace_service_pb2.ExportTraceServiceResponse()

    def trace(self, trace_id: str) -> list[dict]:
        with self.lock:
            return list(self.spans.get(trace_id, []))


def _value(value):
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@pytest.fixture(scope="session")
def otlp_receiver():
    receiver = OtlpReceiver()
    receiver.server.start()
    yield receiver
    receiver.server.stop(0)


@pytest.fixture(scope="session")
def stack(otlp_receiver, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("service-logs")
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_receiver.port}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "DELIBERATE_TRACE_EXPORTER": "otlp",
    }
    with Stack(ports=Ports.free(), env=env, log_dir=log_dir) as running:
        yield running
        for service, process in running.processes.items():
            assert process.poll() is None, f"{service} died during the tests; see {log_dir}"
