"""Spans for `deliberate traces`, read from a file the services' `file` exporter wrote (the OpenTelemetry
Collector's file exporter format: one OTLP/JSON `ExportTraceServiceRequest` per line) or fetched from Jaeger's
query API (`GET /api/traces`, the JSON its UI reads). Both become the same plain `Span`s.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from deliberate.core import telemetry


@dataclass(frozen=True)
class Span:
    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16 lowercase hex digits
    parent_id: str  # "" for a root span
    name: str
    service: str  # the resource's service.name, e.g. "deliberate-scheduler"
    start_ns: int  # Unix time
    end_ns: int
    attributes: dict[str, object] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


# --------------------------------------------------------------------------------------------------
# OTLP/JSON lines (the file exporter)
# --------------------------------------------------------------------------------------------------


def read_otlp_file(path: Path) -> list[Span]:
    spans = []
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not a JSON line ({error})") from None
            spans += otlp_spans(request)
    return spans


def otlp_spans(request: dict) -> list[Span]:
    """The spans of one OTLP/JSON `ExportTraceServiceRequest`."""
    spans = []
    for resource_spans in request.get("resourceSpans", []):
        resource = otlp_attributes(resource_spans.get("resource", {}).get("attributes", []))
        service = str(resource.get("service.name", ""))
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                spans.append(
                    Span(
                        trace_id=span["traceId"],
                        span_id=span["spanId"],
                        parent_id=span.get("parentSpanId", ""),
                        name=span["name"],
                        service=service,
                        start_ns=int(span["startTimeUnixNano"]),
                        end_ns=int(span["endTimeUnixNano"]),
                        attributes=otlp_attributes(span.get("attributes", [])),
                    )
                )
    return spans


def otlp_attributes(pairs: list[dict]) -> dict[str, object]:
    return {pair["key"]: otlp_value(pair.get("value", {})) for pair in pairs}


def otlp_value(value: dict) -> object:
    if "arrayValue" in value:
        return [otlp_value(v) for v in value["arrayValue"].get("values", [])]
    if "intValue" in value:
        return int(value["intValue"])  # a string in OTLP/JSON
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    return None


# --------------------------------------------------------------------------------------------------
# Jaeger's query API
# --------------------------------------------------------------------------------------------------


def fetch_jaeger(
    url: str,
    start_ns: int,
    end_ns: int,
    limit: int,
    request_id: str = "",
    trace_id: str = "",
    service: str = "deliberate-scheduler",
) -> list[Span]:
    """One trace by id, or the traces of `service` in [start, end] (at most `limit`), optionally only those
    whose spans carry `deliberate.request.id` = request_id."""
    base = url.rstrip("/")
    if trace_id:
        address = f"{base}/api/traces/{trace_id}"
    else:
        query = {"service": service, "start": start_ns // 1000, "end": end_ns // 1000, "limit": limit}
        if request_id:
            query["tags"] = json.dumps({telemetry.REQUEST_ID: request_id})
        address = f"{base}/api/traces?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(address, timeout=30) as reply:
        return jaeger_spans(json.load(reply))


def jaeger_spans(document: dict) -> list[Span]:
    """The spans of a Jaeger query API answer: {"data": [{"traceID", "spans": [...], "processes": {...}}]}.

    Jaeger gives times in microseconds, the parent as a CHILD_OF reference, attributes as typed `tags`, and
    OTLP array attributes as JSON strings; ids lose leading zeros."""
    spans = []
    for trace in document.get("data") or []:
        processes = trace.get("processes") or {}
        for span in trace.get("spans") or []:
            parent = next((r["spanID"] for r in span.get("references") or [] if r.get("refType") == "CHILD_OF"), "")
            start_ns = int(span["startTime"]) * 1000
            service = span.get("process", processes.get(span.get("processID"), {})).get("serviceName", "")
            spans.append(
                Span(
                    trace_id=span["traceID"].zfill(32),
                    span_id=span["spanID"].zfill(16),
                    parent_id=parent.zfill(16) if parent else "",
                    name=span["operationName"],
                    service=service,
                    start_ns=start_ns,
                    end_ns=start_ns + int(span["duration"]) * 1000,
                    attributes={tag["key"]: jaeger_value(tag) for tag in span.get("tags") or []},
                )
            )
    return spans


def jaeger_value(tag: dict) -> object:
    value = tag.get("value")
    if tag.get("type") == "string" and isinstance(value, str) and value.startswith("["):
        try:
            return json.loads(value)  # an OTLP array attribute
        except json.JSONDecodeError:
            return value
    if tag.get("type") == "int64":
        return int(value)
    return value
