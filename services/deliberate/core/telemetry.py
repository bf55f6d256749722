"""OpenTelemetry for every service: one trace per request across all four processes.

The gRPC instrumentation propagates the trace context over the wire; spans of this project carry
attributes under the `deliberate.` prefix, registered in docs/telemetry.md.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Sequence
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient, GrpcAioInstrumentorServer
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
    SpanExportResult,
)

# Span attribute names, one place (see docs/telemetry.md).
REQUEST_ID = "deliberate.request.id"
DRAFT_ID = "deliberate.draft.id"
DRAFT_INDEX = "deliberate.draft.index"
DRAFT_STRATEGY = "deliberate.draft.strategy"
DRAFT_TOKENS = "deliberate.draft.completion_tokens"
DRAFT_FINISH_REASON = "deliberate.draft.finish_reason"
DRAFT_VALID = "deliberate.draft.valid"
DRAFT_SCORE = "deliberate.draft.score"
DRAFT_OUTCOME = "deliberate.draft.outcome"
DRAFT_ROUND = "deliberate.draft.round"
DRAFT_FAILED_RULES = "deliberate.draft.failed_rules"
NUM_DRAFTS = "deliberate.num_drafts"
ROUND = "deliberate.round"
ROUNDS = "deliberate.rounds"
SOLVE_STATUS = "deliberate.solve.status"
RISK_PD = "deliberate.risk.probability_of_default"
RISK_LGD = "deliberate.risk.loss_given_default"
RISK_MODEL_VERSION = "deliberate.risk.model_version"


def stage_seconds(stage: str) -> str:
    """The request span's attribute holding one stage's seconds, e.g. `deliberate.stage.draft.seconds`."""
    return f"deliberate.stage.{stage}.seconds"


def setup_tracing(service: str, exporter: str = "auto", trace_file: str = "") -> TracerProvider:
    """Installs the global tracer provider and the gRPC instrumentation for `service`."""
    if exporter == "auto":
        exporter = "otlp" if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") else "file" if trace_file else "none"
    provider = TracerProvider(resource=Resource.create({"service.name": f"deliberate-{service}"}))
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        # Endpoint, headers and TLS come from the standard OTEL_EXPORTER_OTLP_* variables.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter == "file":
        if not trace_file:
            raise ValueError("trace_exporter file needs trace_file, the path to append spans to")
        provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(Path(trace_file))))
    elif exporter != "none":
        raise ValueError(f"trace_exporter must be otlp, file, console, none or auto, not {exporter!r}")
    trace.set_tracer_provider(provider)
    GrpcAioInstrumentorServer().instrument()
    GrpcAioInstrumentorClient().instrument()
    return provider


def current_trace_id() -> str:
    """The hex trace id of the active span, or "" outside a trace."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


class FileSpanExporter(SpanExporter):
    """Appends spans to a file in the OpenTelemetry Collector's file exporter format: each batch one line, an
    OTLP/JSON `ExportTraceServiceRequest` (camelCase, enums as numbers, 64-bit integers as strings, ids as hex).

    Several processes may append to one file: each line is written with one O_APPEND write, which the kernel
    never interleaves with another process's write to a local file."""

    def __init__(self, path: Path):
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
        for resource_spans in request.get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                for span in scope_spans.get("spans", []):
                    hex_ids(span)
                    for link in span.get("links", []):
                        hex_ids(link)
        line = (json.dumps(request, separators=(",", ":")) + "\n").encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def hex_ids(item: dict) -> None:
    """OTLP/JSON spells trace and span ids in hex, where protobuf's JSON mapping of bytes gives base64."""
    for key in ("traceId", "spanId", "parentSpanId"):
        if item.get(key):
            item[key] = base64.b64decode(item[key]).hex()
