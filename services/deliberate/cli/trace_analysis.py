"""What `deliberate traces` computes from spans: per-stage latency, the draft funnel, the rules that reject drafts,
the cost of re-draft rounds, the slowest drafts and one request's critical path. Pure functions over `Span`s;
the span names and attributes are those of docs/telemetry.md.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from deliberate.core import telemetry
from deliberate.core.stats import percentile

from .trace_spans import Span

SCHEDULER = "deliberate-scheduler"
REQUEST_SPANS = (
    "/deliberate.scheduler.v1.SchedulerService/Solve",
    "/deliberate.scheduler.v1.SchedulerService/SolveStream",
)
STAGES = ("draft", "verify", "select", "refine", "total")


@dataclass
class Request:
    """One solve: its trace and the Scheduler's span for the call (`span`), which carries the request's id,
    status, rounds and stage seconds."""

    span: Span
    spans: list[Span]  # its whole trace

    @property
    def request_id(self) -> str:
        return str(self.span.attributes.get(telemetry.REQUEST_ID, ""))

    @property
    def trace_id(self) -> str:
        return self.span.trace_id

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name and s.attributes.get(telemetry.REQUEST_ID) == self.request_id]

    @property
    def drafts(self) -> list[Span]:
        """The Scheduler's `deliberate.draft` spans, one per draft of every round."""
        return self.named("deliberate.draft")


def all_drafts(requests: list[Request]) -> list[Span]:
    return [d for r in requests for d in r.drafts]


def requests_of(spans: Iterable[Span]) -> list[Request]:
    """Every solve among `spans` (a trace may hold one), in order of start."""
    traces: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    requests = [
        Request(span, trace)
        for trace in traces.values()
        for span in trace
        if span.service == SCHEDULER and span.name in REQUEST_SPANS and telemetry.REQUEST_ID in span.attributes
    ]
    return sorted(requests, key=lambda r: r.span.start_ns)


def latency(values: list[float]) -> dict[str, float | int | None]:
    return {
        "count": len(values),
        "p50": percentile(values, 0.50),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
    }


def stage_latency(requests: list[Request]) -> dict[str, dict]:
    """Seconds per stage over the requests that reached it, as the Scheduler recorded them on the request
    span (the same numbers as SolveResponse.timings and deliberate_stage_duration_seconds)."""
    seconds = {stage: telemetry.stage_seconds(stage) for stage in STAGES}
    return {
        stage: latency([float(r.span.attributes[key]) for r in requests if key in r.span.attributes])
        for stage, key in seconds.items()
    }


def span_latency(requests: list[Request]) -> list[dict]:
    """Seconds per span name and service, over the requests' traces, slowest p50 first."""
    durations: dict[tuple[str, str], list[float]] = defaultdict(list)
    for request in requests:
        for span in request.spans:
            durations[(span.service, span.name)].append(span.seconds)
    rows = [{"service": service, "name": name, **latency(values)} for (service, name), values in durations.items()]
    return sorted(rows, key=lambda row: -row["p50"])


def funnel(drafts: list[Span]) -> dict[str, int]:
    """Drafts generated, shared a duplicate's verdict, were verified, passed every hard rule, were selected."""
    return {
        "generated": len(drafts),
        "duplicates": sum("deliberate.draft.duplicate_of" in d.attributes for d in drafts),
        "verified": sum(telemetry.DRAFT_VALID in d.attributes for d in drafts),
        "valid": sum(d.attributes.get(telemetry.DRAFT_VALID) is True for d in drafts),
        "selected": sum(d.attributes.get(telemetry.DRAFT_OUTCOME) == "selected" for d in drafts),
        "abandoned": sum(d.attributes.get(telemetry.DRAFT_OUTCOME) == "abandoned" for d in drafts),
    }


def rejecting_rules(drafts: list[Span]) -> list[dict]:
    """The hard rules that failed drafts, most drafts first; share = of the drafts that failed any."""
    counts = Counter(rule for d in drafts for rule in set(d.attributes.get(telemetry.DRAFT_FAILED_RULES) or []))
    rejected = sum(bool(d.attributes.get(telemetry.DRAFT_FAILED_RULES)) for d in drafts)
    return [{"rule": rule, "drafts": n, "share": n / rejected} for rule, n in counts.most_common()]


def redrafts(requests: list[Request]) -> dict[str, float | int]:
    """Rounds after the first: how many, their seconds (the `deliberate.round` spans) and their draft tokens,
    also as shares of all solve time and all draft tokens."""
    extra_rounds = [s for r in requests for s in r.named("deliberate.round") if s.attributes[telemetry.ROUND] > 0]
    drafts = all_drafts(requests)
    extra_tokens = sum(tokens(d) for d in drafts if d.attributes.get(telemetry.DRAFT_ROUND, 0) > 0)
    extra_seconds = sum(s.seconds for s in extra_rounds)
    all_seconds = sum(r.span.seconds for r in requests)
    all_tokens = sum(tokens(d) for d in drafts)
    return {
        "requests_redrafted": sum(rounds(r) > 1 for r in requests),
        "extra_rounds": len(extra_rounds),
        "extra_round_seconds": extra_seconds,
        "extra_round_tokens": extra_tokens,
        "share_of_solve_seconds": extra_seconds / all_seconds if all_seconds else 0.0,
        "share_of_draft_tokens": extra_tokens / all_tokens if all_tokens else 0.0,
    }


def rounds(request: Request) -> int:
    return int(request.span.attributes.get(telemetry.ROUNDS, 0))


def tokens(span: Span) -> int:
    return int(span.attributes.get(telemetry.DRAFT_TOKENS, 0))


def slowest_drafts(requests: list[Request], count: int) -> list[dict]:
    """The Drafter's `drafter.draft` spans (batch start to this draft's completion) that took longest."""
    generated = [s for r in requests for s in r.named("drafter.draft")]
    round_of = {
        d.attributes.get(telemetry.DRAFT_ID): d.attributes.get(telemetry.DRAFT_ROUND) for d in all_drafts(requests)
    }
    return [
        {
            "request_id": s.attributes.get(telemetry.REQUEST_ID),
            "draft_id": s.attributes.get(telemetry.DRAFT_ID),
            "round": round_of.get(s.attributes.get(telemetry.DRAFT_ID)),
            "index": s.attributes.get(telemetry.DRAFT_INDEX),
            "seconds": s.seconds,
            "tokens": tokens(s),
            "finish_reason": s.attributes.get(telemetry.DRAFT_FINISH_REASON, ""),
        }
        for s in sorted(generated, key=lambda s: -s.seconds)[:count]
    ]


def per_request(request: Request) -> dict:
    drafts = request.drafts
    return {
        "request_id": request.request_id,
        "trace_id": request.trace_id,
        "status": request.span.attributes.get(telemetry.SOLVE_STATUS, ""),
        "rounds": rounds(request),
        "seconds": request.span.seconds,
        "draft_tokens": sum(tokens(d) for d in drafts),
        **funnel(drafts),
    }


# --------------------------------------------------------------------------------------------------
# Critical path
# --------------------------------------------------------------------------------------------------


@dataclass
class Step:
    span: Span
    depth: int
    on_path_ns: int = 0  # the time this span itself, not a child, determined the end

    def to_dict(self, origin_ns: int) -> dict:
        return {
            "service": self.span.service,
            "name": self.span.name,
            "draft_id": self.span.attributes.get(telemetry.DRAFT_ID, ""),
            "depth": self.depth,
            "start_s": (self.span.start_ns - origin_ns) / 1e9,
            "seconds": self.span.seconds,
            "on_path_s": self.on_path_ns / 1e9,
        }


def critical_path(spans: list[Span]) -> list[Step]:
    """The chain of spans that determined when the trace's root ended, in order of start (Jaeger's algorithm,
    extended to streams): walking back from a span's end, the child whose work reached furthest is on the path,
    then the one that reached furthest before that child started, and so on; the gaps between are the span's own
    time. A child still open at that point (a streaming call, a draft's span that outlives its round) counts
    only through its own children's work before it. The steps' `on_path_ns` add up to the root's duration."""
    children: dict[str, list[Span]] = defaultdict(list)
    ids = {s.span_id for s in spans}
    for span in spans:
        if span.parent_id in ids:
            children[span.parent_id].append(span)
    roots = [s for s in spans if s.parent_id not in ids]
    if not roots:
        return []
    steps: list[Step] = []

    def reach(span: Span, limit: int) -> int:
        """When the span's work ended as seen from `limit`: its end, or for a span still open then, the
        furthest reach of its children before it (0: none)."""
        if span.end_ns <= limit:
            return span.end_ns
        return max((reach(c, limit) for c in children[span.span_id] if c.start_ns < limit), default=0)

    def walk(span: Span, end_ns: int, depth: int) -> None:
        step = Step(span, depth)
        steps.append(step)
        cursor = end_ns
        while cursor > span.start_ns:
            # Among equal reaches the child started first: the stream whose items the others handle.
            reached = [(reach(c, cursor), -c.start_ns, c) for c in children[span.span_id] if c.start_ns < cursor]
            child_end, _, child = max(reached, key=lambda r: r[:2], default=(0, 0, None))
            child_start = max(child.start_ns, span.start_ns) if child else cursor
            if child is None or child_end <= child_start:
                break
            step.on_path_ns += cursor - child_end
            walk(child, child_end, depth + 1)
            cursor = child_start
        step.on_path_ns += max(0, cursor - span.start_ns)

    root = min(roots, key=lambda s: (s.start_ns, -s.end_ns))
    walk(root, root.end_ns, 0)
    return sorted(steps, key=lambda s: (s.span.start_ns, s.depth))


# --------------------------------------------------------------------------------------------------
# The whole report
# --------------------------------------------------------------------------------------------------


def report(requests: list[Request], slowest: int = 5, path_request: Request | None = None) -> dict:
    """Everything `deliberate traces` prints, as one JSON-ready document. The critical path is that of
    `path_request`, by default the slowest request."""
    drafts = all_drafts(requests)
    if path_request is None and requests:
        path_request = max(requests, key=lambda r: r.span.seconds)
    path = None
    if path_request is not None:
        steps = critical_path(path_request.spans)
        origin = steps[0].span.start_ns if steps else 0
        path = {
            "request_id": path_request.request_id,
            "trace_id": path_request.trace_id,
            "seconds": steps[0].span.seconds if steps else 0.0,
            "steps": [step.to_dict(origin) for step in steps],
        }
    return {
        "requests": len(requests),
        "stages": stage_latency(requests),
        "spans": span_latency(requests),
        "funnel": funnel(drafts),
        "rejecting_rules": rejecting_rules(drafts),
        "redrafts": redrafts(requests),
        "slowest_drafts": slowest_drafts(requests, slowest),
        "critical_path": path,
        "per_request": [per_request(r) for r in requests],
    }
