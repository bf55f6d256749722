"""An OTLP/gRPC trace endpoint inside the test process: services export real spans to it."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


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
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                                "events": [e.name for e in span.events],
                                "start_ns": span.start_time_unix_nano,
                                "end_ns": span.end_time_unix_nano,
                                "event_ns": {e.name: e.time_unix_nano for e in span.events},
                            }
                        )
        return trace_service_pb2.ExportTraceServiceResponse()

    def exporter_env(self) -> dict[str, str]:
        """The environment that makes a service export its spans here, flushed every 200 ms."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "DELIBERATE_TRACE_EXPORTER": "otlp",
        }

    def trace(self, trace_id: str) -> list[dict]:
        with self.lock:
            return list(self.spans.get(trace_id, []))

    def trace_of_request(self, request_id: str) -> str:
        """The trace id whose spans carry this `deliberate.request.id` ("" while none arrived)."""
        with self.lock:
            for trace_id, spans in self.spans.items():
                if any(s["attributes"].get("deliberate.request.id") == request_id for s in spans):
                    return trace_id
        return ""

    def orphans(self, trace_id: str) -> list[dict]:
        """The spans of a trace whose parent is not in it (a root span has no parent, so it is none)."""
        spans = self.trace(trace_id)
        ids = {s["span_id"] for s in spans}
        return [s for s in spans if s["parent_span_id"] and s["parent_span_id"] not in ids]


def _value(value):
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@contextmanager
def serving_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    receiver.server.start()
    try:
        yield receiver
    finally:
        receiver.server.stop(0)
