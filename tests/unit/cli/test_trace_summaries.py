"""`deliberate traces` on hand-built spans: the critical path, percentiles, the funnel, rejecting rules and
re-draft cost; the trace file written by the services' exporter read back (also by several writers at once);
and Jaeger's query API answer, parsed from a sample in its documented shape and served by a local HTTP server."""

from __future__ import annotations

import json
import multiprocessing
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from deliberate.cli import traces
from deliberate.cli.trace_analysis import (
    critical_path,
    funnel,
    redrafts,
    rejecting_rules,
    report,
    requests_of,
    stage_latency,
)
from deliberate.cli.trace_spans import Span, jaeger_spans, read_otlp_file
from deliberate.core.telemetry import FileSpanExporter

SOLVE = "/deliberate.scheduler.v1.SchedulerService/Solve"
MS = 1_000_000


def span(name, span_id, parent="", start=0, end=0, trace="t1", service="deliberate-scheduler", **attributes):
    """A span from milliseconds; attribute names without the `deliberate.` prefix, dots as underscores."""
    attributes = {"deliberate." + k.replace("__", "."): v for k, v in attributes.items()}
    return Span(trace, span_id, parent, name, service, start * MS, end * MS, attributes)


def path_of(spans):
    return {step.span.span_id: step.on_path_ns / MS for step in critical_path(spans)}


def test_the_critical_path_follows_the_last_finishing_child_back_in_time():
    spans = [
        span("root", "r", "", 0, 100),
        span("a", "a", "r", 0, 25),  # ends before b starts: on the path
        span("b", "b", "r", 30, 90),  # finishes last
        span("c", "c", "r", 50, 70),  # overlaps b: not on the path
        span("d", "d", "b", 35, 60),
    ]
    assert path_of(spans) == {"r": 15, "b": 35, "d": 25, "a": 25}
    assert [s.span.name for s in critical_path(spans)] == ["root", "a", "b", "d"], "in order of start"


def test_a_child_still_open_counts_through_its_childrens_work_before_that_point():
    spans = [
        span("round", "r", "", 0, 100),
        span("generate", "g", "r", 0, 62),  # the stream of drafts, closed after the last one arrived
        span("drafter.draft", "gd", "g", 0, 58),
        span("draft 1", "d1", "r", 30, 200),  # a draft's span, open past its round until selection
        span("verify 1", "v1", "d1", 31, 40),
        span("draft 2", "d2", "r", 60, 200),
        span("verify 2", "v2", "d2", 61, 95),  # the verdict the round waited for last
        span("draft 3", "d3", "r", 80, 200),  # a duplicate: no verification of its own
    ]
    assert path_of(spans) == {"r": 7, "d2": 1, "v2": 34, "g": 0, "gd": 58}


def test_the_path_starts_at_the_trace_root_even_when_its_parent_is_elsewhere():
    spans = [span("solve", "s", "gateway-span", 10, 30), span("refine", "f", "s", 12, 30)]
    assert path_of(spans) == {"s": 2, "f": 18}


def request(request_id, trace, total, rounds=1, **stages):
    attributes = {"request__id": request_id, "rounds": rounds, "stage__total__seconds": total}
    attributes |= {f"stage__{stage}__seconds": seconds for stage, seconds in stages.items()}
    return span(SOLVE, f"{trace}-solve", "", 0, int(total * 1000), trace=trace, **attributes)


def test_stage_percentiles_interpolate_and_count_only_the_requests_that_reached_a_stage():
    spans = [request(f"r{i}", f"t{i}", total=float(i), draft=0.5 * i) for i in range(1, 5)]
    spans.append(request("r5", "t5", total=5.0))  # failed before drafting
    stages = stage_latency(requests_of(spans))
    assert stages["total"] == {"count": 5, "p50": 3.0, "p95": pytest.approx(4.8), "p99": pytest.approx(4.96)}
    assert stages["draft"]["count"] == 4 and stages["draft"]["p50"] == pytest.approx(1.25)
    assert stages["refine"] == {"count": 0, "p50": None, "p95": None, "p99": None}


def draft(span_id, outcome, valid=None, failed=(), tokens=10, round_=0, **more):
    attributes = {"draft__outcome": outcome, "draft__completion_tokens": tokens, "draft__round": round_}
    if valid is not None:
        attributes["draft__valid"] = valid
    if failed:
        attributes["draft__failed_rules"] = list(failed)
    return span("deliberate.draft", span_id, "x-solve", request__id="x", **attributes, **more)


def test_the_funnel_and_the_rules_that_reject_drafts():
    drafts = [
        draft("1", "selected", valid=True),
        draft("2", "discarded", valid=False, failed=["arithmetic", "impossible"]),
        draft("3", "discarded", valid=False, failed=["impossible"], draft__duplicate_of="x-r0-d1"),
        draft("4", "abandoned"),
    ]
    assert funnel(drafts) == {
        "generated": 4,
        "duplicates": 1,
        "verified": 3,
        "valid": 1,
        "selected": 1,
        "abandoned": 1,
    }
    assert rejecting_rules(drafts) == [
        {"rule": "impossible", "drafts": 2, "share": 1.0},
        {"rule": "arithmetic", "drafts": 1, "share": 0.5},
    ]


def test_redraft_rounds_cost_their_round_spans_time_and_their_drafts_tokens():
    spans = [
        request("x", "t1", total=1.0, rounds=3),
        span("deliberate.round", "q0", "t1-solve", 0, 300, round=0, request__id="x"),
        span("deliberate.round", "q1", "t1-solve", 300, 500, round=1, request__id="x"),
        span("deliberate.round", "q2", "t1-solve", 500, 800, round=2, request__id="x"),
        draft("d0", "discarded", tokens=30, round_=0),
        draft("d1", "discarded", tokens=20, round_=1),
        draft("d2", "selected", tokens=50, round_=2),
        request("y", "t2", total=1.0),
    ]
    assert redrafts(requests_of(spans)) == {
        "requests_redrafted": 1,
        "extra_rounds": 2,
        "extra_round_seconds": pytest.approx(0.5),
        "extra_round_tokens": 70,
        "share_of_solve_seconds": pytest.approx(0.25),
        "share_of_draft_tokens": pytest.approx(0.7),
    }


def write_spans(path, count):
    provider = TracerProvider(resource=Resource.create({"service.name": "deliberate-scheduler"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("test")
    for i in range(count):
        with tracer.start_as_current_span(SOLVE, attributes={"deliberate.request.id": f"r{i}", "pad": "x" * 5000}):
            with tracer.start_as_current_span("deliberate.draft", attributes={"deliberate.draft.failed_rules": ["a"]}):
                pass
    provider.shutdown()


def test_the_trace_file_reads_back_with_hex_ids_typed_attributes_and_parents(tmp_path):
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "deliberate-scheduler"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(SOLVE, attributes={"deliberate.rounds": 2}) as outer:
        with tracer.start_as_current_span("inner", attributes={"deliberate.draft.failed_rules": ["a", "b"]}) as inner:
            pass
    provider.shutdown()
    spans = {s.name: s for s in read_otlp_file(path)}
    assert spans[SOLVE].span_id == format(outer.get_span_context().span_id, "016x")
    assert spans["inner"].trace_id == format(inner.get_span_context().trace_id, "032x")
    assert spans["inner"].parent_id == spans[SOLVE].span_id and spans[SOLVE].parent_id == ""
    assert spans[SOLVE].attributes["deliberate.rounds"] == 2
    assert spans["inner"].attributes["deliberate.draft.failed_rules"] == ["a", "b"]
    assert spans[SOLVE].service == "deliberate-scheduler" and spans[SOLVE].end_ns >= spans["inner"].end_ns


def test_several_processes_appending_to_one_file_never_interleave_lines(tmp_path):
    path = tmp_path / "spans.jsonl"
    writers = [multiprocessing.Process(target=write_spans, args=(path, 40)) for _ in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    lines = path.read_text().splitlines()
    assert len(lines) == 4 * 40 * 2, "one line per exported batch (one span each here)"
    assert len(read_otlp_file(path)) == len(lines), "every line is whole JSON"


# The shape of GET /api/traces (Jaeger's query service, the JSON its UI reads): microseconds, CHILD_OF
# references, typed tags, processes by id; trace ids without leading zeros; OTLP arrays as JSON strings.
JAEGER = {
    "data": [
        {
            "traceID": "a3f2c1d4e5f60718",
            "spans": [
                {
                    "traceID": "a3f2c1d4e5f60718",
                    "spanID": "1a2b3c4d5e6f7081",
                    "flags": 1,
                    "operationName": SOLVE,
                    "references": [],
                    "startTime": 1764597600000000,
                    "duration": 2500000,
                    "tags": [
                        {"key": "span.kind", "type": "string", "value": "server"},
                        {"key": "deliberate.request.id", "type": "string", "value": "abc"},
                        {"key": "deliberate.rounds", "type": "int64", "value": 1},
                        {"key": "deliberate.stage.total.seconds", "type": "float64", "value": 2.5},
                    ],
                    "logs": [],
                    "processID": "p1",
                    "warnings": None,
                },
                {
                    "traceID": "a3f2c1d4e5f60718",
                    "spanID": "2b3c4d5e6f708192",
                    "flags": 1,
                    "operationName": "deliberate.draft",
                    "references": [
                        {"refType": "CHILD_OF", "traceID": "a3f2c1d4e5f60718", "spanID": "1a2b3c4d5e6f7081"}
                    ],
                    "startTime": 1764597600100000,
                    "duration": 1900000,
                    "tags": [
                        {"key": "deliberate.request.id", "type": "string", "value": "abc"},
                        {"key": "deliberate.draft.valid", "type": "bool", "value": False},
                        {"key": "deliberate.draft.failed_rules", "type": "string", "value": '["arithmetic"]'},
                        {"key": "deliberate.draft.outcome", "type": "string", "value": "discarded"},
                    ],
                    "logs": [{"timestamp": 1764597600500000, "fields": [{"key": "event", "value": "verified"}]}],
                    "processID": "p1",
                    "warnings": None,
                },
                {
                    "traceID": "a3f2c1d4e5f60718",
                    "spanID": "3c4d5e6f708192a3",
                    "flags": 1,
                    "operationName": "verifier.verify_draft",
                    "references": [
                        {"refType": "CHILD_OF", "traceID": "a3f2c1d4e5f60718", "spanID": "2b3c4d5e6f708192"}
                    ],
                    "startTime": 1764597600200000,
                    "duration": 300000,
                    "tags": [{"key": "deliberate.request.id", "type": "string", "value": "abc"}],
                    "logs": [],
                    "processID": "p2",
                    "warnings": None,
                },
            ],
            "processes": {
                "p1": {"serviceName": "deliberate-scheduler", "tags": []},
                "p2": {"serviceName": "deliberate-verifier", "tags": []},
            },
            "warnings": None,
        }
    ],
    "total": 0,
    "limit": 0,
    "offset": 0,
    "errors": None,
}


def test_jaeger_answers_become_the_same_spans():
    spans = {s.name: s for s in jaeger_spans(JAEGER)}
    solve, lifecycle, verify = spans[SOLVE], spans["deliberate.draft"], spans["verifier.verify_draft"]
    assert solve.trace_id == "0000000000000000a3f2c1d4e5f60718" and solve.parent_id == ""
    assert lifecycle.parent_id == solve.span_id and verify.service == "deliberate-verifier"
    assert solve.seconds == 2.5 and solve.start_ns == 1764597600000000000
    assert lifecycle.attributes["deliberate.draft.failed_rules"] == ["arithmetic"]
    document = report(requests_of(spans.values()))
    assert document["requests"] == 1 and document["funnel"]["verified"] == 1
    assert document["rejecting_rules"] == [{"rule": "arithmetic", "drafts": 1, "share": 1.0}]
    assert [s["name"] for s in document["critical_path"]["steps"]] == [
        SOLVE,
        "deliberate.draft",
        "verifier.verify_draft",
    ]


def test_the_command_asks_jaeger_for_the_schedulers_traces_in_the_window(capsys):
    asked = []

    class Jaeger(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server naming)
            asked.append(self.path)
            body = json.dumps(JAEGER).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Jaeger)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        code = traces.main(["--jaeger", url, "--start", "2025-12-01T14:00:00+00:00", "--end", "2025-12-01T15:00:00Z"])
    finally:
        server.shutdown()
    assert code == 0
    path, query = asked[0].split("?")
    assert path == "/api/traces"
    assert urllib.parse.parse_qs(query) == {
        "service": ["deliberate-scheduler"],
        "start": ["1764597600000000"],
        "end": ["1764601200000000"],
        "limit": ["200"],
    }
    out = capsys.readouterr().out
    assert "critical path of request abc" in out and "arithmetic" in out


def test_columns_align():
    text = traces.table(["stage", "count", "p50"], [["draft", 3, "1.500s"], ["total", 12, "10.250s"]])
    assert text.splitlines() == [
        "stage  count      p50",
        "draft      3   1.500s",
        "total     12  10.250s",
    ]


@pytest.mark.parametrize("since", ["15", "1 h", "h1"])
def test_a_window_needs_a_number_and_a_unit(since):
    parser_args = traces.argparse.Namespace(since=since, start=None, end=None, jaeger=None)
    with pytest.raises(ValueError, match="--since"):
        traces.window(parser_args)
