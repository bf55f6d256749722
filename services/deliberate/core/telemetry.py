"""OpenTelemetry for every service: one trace per request across all four processes.

The gRPC instrumentation propagates the trace context over the wire; spans of this project carry
attributes under the `deliberate.` prefix, registered in docs/telemetry.md.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient, GrpcAioInstrumentorServer
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

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
NUM_DRAFTS = "deliberate.num_drafts"
SOLVE_STATUS = "deliberate.solve.status"


def setup_tracing(service: str, exporter: str = "auto") -> TracerProvider:
    """Installs the global tracer provider and the gRPC instrumentation for `service`."""
    if exporter == "auto":
        exporter = "otlp" if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") else "none"
    provider = TracerProvider(resource=Resource.create({"service.name": f"deliberate-{service}"}))
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        # Endpoint, headers and TLS come from the standard OTEL_EXPORTER_OTLP_* variables.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter != "none":
        raise ValueError(f"trace_exporter must be otlp, console, none or auto, not {exporter!r}")
    trace.set_tracer_provider(provider)
    GrpcAioInstrumentorServer().instrument()
    GrpcAioInstrumentorClient().instrument()
    return provider


def current_trace_id() -> str:
    """The hex trace id of the active span, or "" outside a trace."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""
