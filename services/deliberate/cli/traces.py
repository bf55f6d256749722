"""`deliberate traces`: where the time and the drafts of recent requests went, read from the spans of a trace
file (`deliberate up --trace-file`) or from Jaeger (docs/telemetry.md#analysing-traces)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
from datetime import datetime
from pathlib import Path

from deliberate_client.cli import SERVER_COMMANDS

from .trace_analysis import STAGES, Request, report, requests_of
from .trace_spans import Span, fetch_jaeger, read_otlp_file

SINCE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_command(commands: argparse._SubParsersAction) -> None:
    """Registered in the entry-point group `deliberate.commands` (pyproject.toml)."""
    traces = commands.add_parser("traces", help=SERVER_COMMANDS["traces"])
    source = traces.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", type=Path, help="a trace file written by `deliberate up --trace-file`")
    source.add_argument("--jaeger", metavar="URL", help="Jaeger's query service, e.g. http://localhost:16686")
    traces.add_argument("--since", help="only requests started in the last 30s, 15m, 1h, 2d (Jaeger default: 1h)")
    traces.add_argument("--start", type=timestamp, help="only requests started at or after (ISO 8601 or Unix s)")
    traces.add_argument("--end", type=timestamp, help="only requests started before (ISO 8601 or Unix s)")
    traces.add_argument("--request-id", help="one request; its critical path")
    traces.add_argument("--trace-id", help="one trace; its critical path")
    traces.add_argument("--slowest", type=int, default=5, help="how many of the slowest drafts to list")
    traces.add_argument("--limit", type=int, default=200, help="most traces to fetch from Jaeger")
    traces.add_argument("--json", action="store_true", help="one JSON document instead of tables")
    traces.set_defaults(run=run_traces)


def timestamp(text: str) -> float:
    """Unix seconds from "1764590000" or an ISO 8601 time ("2026-12-01T14:00:00Z"; local time without a zone)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (ISO 8601 or Unix seconds)") from None


def window(args: argparse.Namespace) -> tuple[float, float]:
    """The [start, end) in Unix seconds that requests must start in."""
    start, end = args.start or 0.0, args.end or float("inf")
    if args.since:
        match = SINCE.match(args.since)
        if not match:
            raise ValueError(f"--since {args.since!r}: a number and s, m, h or d, e.g. 15m")
        start = max(start, time.time() - float(match[1]) * UNIT_SECONDS[match[2]])
    elif args.jaeger and not args.start and not (args.request_id or args.trace_id):
        start = time.time() - 3600
    return start, end


def load_spans(args: argparse.Namespace, start: float, end: float) -> list[Span]:
    if args.file:
        return read_otlp_file(args.file)
    end_ns = int(min(end, time.time() + 60) * 1e9)
    start_ns = int(start * 1e9) if start else end_ns - int(7 * 86400 * 1e9)
    return fetch_jaeger(args.jaeger, start_ns, end_ns, args.limit, args.request_id or "", args.trace_id or "")


def chosen(requests: list[Request], args: argparse.Namespace, start: float, end: float) -> list[Request]:
    return [
        r
        for r in requests
        if start <= r.span.start_ns / 1e9 < end
        and (not args.request_id or r.request_id == args.request_id)
        and (not args.trace_id or r.trace_id == args.trace_id)
    ]


def run_traces(args: argparse.Namespace) -> int:
    try:
        start, end = window(args)
        spans = load_spans(args, start, end)
    except (OSError, ValueError, urllib.error.URLError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    requests = chosen(requests_of(spans), args, start, end)
    if not requests:
        print("no requests in these spans (are the services flushing? spans leave every 5 s)", file=sys.stderr)
        return 1
    document = report(requests, args.slowest)
    print(json.dumps(document, indent=2) if args.json else render(document))
    return 0


# --------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------


def render(document: dict) -> str:
    parts = [f"{document['requests']} request(s)", stages_table(document), spans_table(document)]
    parts += [funnel_table(document), rules_table(document), redraft_line(document)]
    parts += [drafts_table(document), path_table(document)]
    return "\n\n".join(part for part in parts if part)


def table(headers: list[str], rows: list[list[object]], left: int = 1) -> str:
    """Aligned columns: the first `left` columns left-aligned, the rest (numbers) right-aligned."""
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


def percent(share: float) -> str:
    return f"{100 * share:.0f}%"


def stages_table(document: dict) -> str:
    rows = [
        [stage, d["count"], seconds(d["p50"]), seconds(d["p95"]), seconds(d["p99"])]
        for stage in STAGES
        if (d := document["stages"][stage])["count"]
    ]
    return table(["stage", "count", "p50", "p95", "p99"], rows)


def spans_table(document: dict) -> str:
    rows = [
        [s["service"].removeprefix("deliberate-"), s["name"], s["count"], seconds(s["p50"]), seconds(s["p95"])]
        + [seconds(s["p99"])]
        for s in document["spans"]
    ]
    return table(["service", "span", "count", "p50", "p95", "p99"], rows, left=2)


def funnel_table(document: dict) -> str:
    f = document["funnel"]
    generated = f["generated"] or 1
    rows = [[name, f[name], percent(f[name] / generated)] for name in ("generated", "verified", "valid", "selected")]
    rows += [[name, f[name], percent(f[name] / generated)] for name in ("duplicates", "abandoned") if f[name]]
    return table(["drafts", "count", "of generated"], rows)


def rules_table(document: dict) -> str:
    rows = [[r["rule"], r["drafts"], percent(r["share"])] for r in document["rejecting_rules"]]
    return table(["rejecting rule", "drafts", "share"], rows) if rows else "no draft failed a hard rule"


def redraft_line(document: dict) -> str:
    r = document["redrafts"]
    if not r["extra_rounds"]:
        return "re-drafts: none"
    return (
        f"re-drafts: {r['requests_redrafted']} of {document['requests']} request(s), {r['extra_rounds']} extra "
        f"round(s), {r['extra_round_seconds']:.3f}s ({percent(r['share_of_solve_seconds'])} of solve time), "
        f"{r['extra_round_tokens']} tokens ({percent(r['share_of_draft_tokens'])} of draft tokens)"
    )


def drafts_table(document: dict) -> str:
    rows = [
        [d["request_id"], d["round"], d["index"], seconds(d["seconds"]), d["tokens"], d["finish_reason"]]
        for d in document["slowest_drafts"]
    ]
    return "slowest drafts\n" + table(["request", "round", "index", "latency", "tokens", "finish"], rows)


def path_table(document: dict) -> str:
    path = document["critical_path"]
    if not path:
        return ""
    rows = [
        [
            "  " * s["depth"] + f"{s['name']} {s['draft_id']}".rstrip(),
            s["service"].removeprefix("deliberate-"),
            seconds(s["start_s"]),
            seconds(s["seconds"]),
            seconds(s["on_path_s"]),
        ]
        for s in path["steps"]
    ]
    title = f"critical path of request {path['request_id']} (trace {path['trace_id']}, {path['seconds']:.3f}s)"
    return title + "\n" + table(["span", "service", "start", "duration", "on path"], rows, left=2)


def main(argv: list[str] | None = None) -> int:
    """`python -m deliberate.cli.traces …`, the same as `deliberate traces …`."""
    parser = argparse.ArgumentParser(prog="deliberate")
    add_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["traces", *(sys.argv[1:] if argv is None else argv)])
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
