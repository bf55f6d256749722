"""Whole traces: every span a request produces, in all four processes, has its parent in the same trace —
for a solve, for a solve that needs a re-draft round, and for a solve the client cancels mid-refinement.

A parent that is missing is a span that was never ended (so never exported): a trace viewer shows its
children detached from the request."""

from __future__ import annotations

import time

import pytest

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

pytestmark = pytest.mark.model

IMPOSSIBLE = [{"id": "impossible", "celExpression": "size(text) < 0", "failureMessage": "no text is that short"}]


def whole_trace(receiver, trace_id: str, services: set[str], timeout_s: float = 15.0) -> list[dict]:
    """Waits until the services' spans arrived and every parent is there (spans are exported in batches);
    returns the orphans left when the time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        spans = receiver.trace(trace_id)
        if {s["service"] for s in spans} >= services and not receiver.orphans(trace_id):
            time.sleep(1.0)  # stragglers of a later batch may still be orphans
            break
        time.sleep(0.2)
    return receiver.orphans(trace_id)


def describe(spans: list[dict]) -> list[str]:
    return [f"{s['service']} {s['name']} (parent {s['parent_span_id']})" for s in spans]


ALL = {"deliberate-drafter", "deliberate-verifier", "deliberate-refiner", "deliberate-scheduler"}


def test_a_solve_is_one_whole_trace(stack, otlp_receiver):
    request = build_request("What is 6 times 7?", num_drafts=2, max_new_tokens=24, refine_max_new_tokens=12, seed=3)
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=240)
    orphans = whole_trace(otlp_receiver, response.trace_id, ALL)
    assert not orphans, describe(orphans)
    names = {s["name"] for s in otlp_receiver.trace(response.trace_id)}
    assert "/deliberate.refiner.v1.RefinerService/Refine" in names


def test_a_redraft_is_one_whole_trace(stack, otlp_receiver):
    request = build_request(
        "Name a colour.", num_drafts=2, max_new_tokens=8, refine_max_new_tokens=8, seed=5, constraints=IMPOSSIBLE
    )
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=240)
    assert response.rounds > 1 and response.status == pb.SOLVE_STATUS_UNVERIFIED
    orphans = whole_trace(otlp_receiver, response.trace_id, ALL)
    assert not orphans, describe(orphans)
    drafting = ("/GenerateDrafts", "/StreamDrafts")  # StreamDrafts with early stopping (docs/scheduler.md)
    generations = [s for s in otlp_receiver.trace(response.trace_id) if s["name"].endswith(drafting)]
    assert len(generations) >= 2 * response.rounds, "a client and a server span per round"


def test_a_cancelled_solve_is_one_whole_trace(stack, otlp_receiver):
    request_id = f"trace-cancel-{time.time_ns()}"
    request = build_request(
        "Count from one to fifty.", num_drafts=2, max_new_tokens=8, refine_max_new_tokens=200, request_id=request_id
    )
    with DeliberateClient(stack.address) as client:
        call = client.solve_stream(request, timeout=240)
        for event in call:
            if event.HasField("refine_chunk"):
                break
        call.cancel()
    deadline = time.monotonic() + 15
    while not (trace_id := otlp_receiver.trace_of_request(request_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert trace_id, "the cancelled solve's spans arrived"
    orphans = whole_trace(otlp_receiver, trace_id, ALL)
    assert not orphans, describe(orphans)
    names = {s["name"] for s in otlp_receiver.trace(trace_id)}
    assert "/deliberate.scheduler.v1.SchedulerService/SolveStream" in names, "the cancelled root span was ended"
