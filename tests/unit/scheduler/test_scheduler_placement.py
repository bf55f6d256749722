"""Where a draft was generated, as the response and the trace say it (`DraftState.place`, `DraftReport.placement`)."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deliberate.core import telemetry
from deliberate.scheduler.solve import DraftState
from deliberate_api.common.v1 import common_pb2

LOST = "127.0.0.1:50062"
LIVE = "127.0.0.1:50052"
REASON = f"replica {LOST} lost: drafter unavailable: Socket closed"


def placed(*moves: tuple) -> tuple[DraftState, dict]:
    """A draft placed once per move (the arguments of `place`), and its ended span's attributes."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    span = provider.get_tracer(__name__).start_span("deliberate.draft")
    state = DraftState(draft=common_pb2.Draft(id="r-0", index=0), round=0, span=span)
    for move in moves:
        state.place(*move)
    span.end()
    (finished,) = spans.get_finished_spans()
    return state, dict(finished.attributes)


def test_a_draft_generated_where_it_was_planned_names_its_replica_and_no_move():
    state, attributes = placed((LIVE,))
    placement = state.to_report().placement
    assert (placement.replica, placement.moved_from, placement.moved_reason) == (LIVE, "", "")
    assert attributes == {telemetry.DRAFT_REPLICA: LIVE}


def test_a_moved_draft_names_the_replica_it_was_lost_on_and_why_in_the_response_and_the_span():
    state, attributes = placed((LOST,), (LIVE, LOST, REASON))
    report = state.to_report()
    assert report.HasField("placement")
    assert (report.placement.replica, report.placement.moved_from) == (LIVE, LOST)
    assert report.placement.moved_reason == REASON
    assert attributes == {telemetry.DRAFT_REPLICA: LIVE, telemetry.DRAFT_MOVED_FROM: LOST}


def test_a_draft_on_the_balanced_channel_has_no_placement():
    state, attributes = placed()
    assert not state.to_report().HasField("placement")
    assert attributes == {}
