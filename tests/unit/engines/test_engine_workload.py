"""The engine's load meter: sequences from submission to completion, and the tokens of recent completions."""

from __future__ import annotations

import pytest

from deliberate.engines.workload import LoadMeter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_busy_fills_the_capacity_and_the_rest_queues():
    meter = LoadMeter()
    meter.submitted(5)
    assert meter.snapshot(capacity=8).busy_sequences == 5
    meter.submitted(5)
    load = meter.snapshot(capacity=8)
    assert (load.busy_sequences, load.queued_sequences, load.capacity) == (8, 2, 8)
    for _ in range(3):
        meter.completed(tokens=10)
    meter.abandoned(2)
    load = meter.snapshot(capacity=8)
    assert (load.busy_sequences, load.queued_sequences) == (5, 0)


def test_recent_speed_counts_only_completions_inside_the_window():
    clock = Clock()
    meter = LoadMeter(window_s=30.0, clock=clock)
    meter.submitted(3)
    meter.completed(tokens=300)
    clock.now += 20
    meter.completed(tokens=150)
    assert meter.snapshot(capacity=4).recent_tokens_per_second == pytest.approx(450 / 30)
    clock.now += 15  # the first completion is 35 s old now
    assert meter.snapshot(capacity=4).recent_tokens_per_second == pytest.approx(150 / 30)
    clock.now += 30
    assert meter.snapshot(capacity=4).recent_tokens_per_second == 0.0
