"""The metrics plumbing: bounded rule-id labels, the status labels of deliberate_solves_total, rule outcomes, and the
engine gauges read from a real engine's load report."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from deliberate.core import metrics
from deliberate.core.metrics import BoundedLabel, count_rule_results, rule_outcome
from deliberate.engines.base import SamplingParams, TextDelta
from deliberate.engines.workload import LOAD_WINDOW_S
from deliberate.scheduler.downstream import StageError
from deliberate.scheduler.pipeline import STATUS_LABEL, failure_status
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from tests.metrics import in_process_value


def test_a_bounded_label_passes_its_first_values_and_calls_the_rest_other():
    label = BoundedLabel(2)
    assert [label(v) for v in ("a", "b", "c", "a", "d", "b")] == ["a", "b", "other", "a", "other", "b"]


def test_solve_status_labels_are_short_lower_case_names():
    assert STATUS_LABEL[pb.SOLVE_STATUS_VERIFIED] == "verified"
    assert STATUS_LABEL[pb.SOLVE_STATUS_UNVERIFIED] == "unverified"
    assert STATUS_LABEL[pb.SOLVE_STATUS_FAILED] == "failed"
    assert failure_status(StageError(grpc.StatusCode.DEADLINE_EXCEEDED, "late")) == "deadline_exceeded"
    assert failure_status(asyncio.CancelledError()) == "cancelled"
    assert failure_status(RuntimeError("bug")) == "internal"


def test_rule_results_are_counted_by_rule_and_outcome():
    assert rule_outcome(passed=True, abstained=True) == "abstained"  # an abstention has passed = true
    before = {o: in_process_value("deliberate.rule.results", rule="unit_rule", outcome=o) for o in ("passed", "failed")}
    count_rule_results(
        [
            common_pb2.RuleResult(rule_id="unit_rule", passed=True),
            common_pb2.RuleResult(rule_id="unit_rule", passed=False),
            common_pb2.RuleResult(rule_id="unit_rule", passed=False),
        ]
    )
    assert in_process_value("deliberate.rule.results", rule="unit_rule", outcome="passed") == before["passed"] + 1
    assert in_process_value("deliberate.rule.results", rule="unit_rule", outcome="failed") == before["failed"] + 2


@pytest.mark.model
def test_engine_gauges_read_the_engines_load_report(llamacpp_engine):
    """A real engine (SmolLM2 on llama.cpp, 4 slots): two sequences in flight while it decodes, none after, and
    their tokens in the recent speed."""
    metrics.observe_engine(llamacpp_engine)
    labels = {"engine": "llamacpp"}
    prompt = llamacpp_engine.format_chat("You are brief.", "Count to ten.")
    params = SamplingParams(max_new_tokens=8, min_new_tokens=8, seed=1)
    tokens_before = in_process_value("deliberate.engine.tokens_per_second", **labels) * LOAD_WINDOW_S

    async def generate() -> float:
        running = 0.0
        async for event in llamacpp_engine.stream([prompt] * 2, params):
            if isinstance(event, TextDelta) and not running:
                running = in_process_value("deliberate.engine.sequences.running", **labels)
        return running

    assert asyncio.run(generate()) == 2
    assert in_process_value("deliberate.engine.sequences.running", **labels) == 0
    assert in_process_value("deliberate.engine.sequences.queued", **labels) == 0
    tokens = in_process_value("deliberate.engine.tokens_per_second", **labels) * LOAD_WINDOW_S
    # Tokens of earlier tests in the shared engine may leave the window meanwhile, never these 16.
    assert 16 - 1e-6 <= tokens <= tokens_before + 16 + 1e-6
