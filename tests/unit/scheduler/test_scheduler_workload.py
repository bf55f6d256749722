"""The Scheduler's load balancer: the Drafter's load report, the PID controller, draft-count bands with hysteresis,
the monitor loop."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deliberate.scheduler.drafter_load import (
    DraftCountPolicy,
    DrafterLoadSampler,
    EngineReport,
    LoadMonitor,
    PidController,
)

# --- PID controller ----------------------------------------------------------------------------------------------


def step_response(controller: PidController, before: float, after: float, steps: int) -> list[float]:
    controller.update(before)
    return [controller.update(after) for _ in range(steps)]


def test_step_input_settles_monotonically_without_overshoot():
    outputs = step_response(PidController(), 0.2, 0.9, 20)
    assert all(a <= b for a, b in zip(outputs, outputs[1:], strict=False))  # never turns back
    assert max(outputs) <= 0.9
    assert abs(outputs[9] - 0.9) < 0.01  # within 10 samples (50 s at the default interval)


def test_step_down_settles_the_same_way():
    outputs = step_response(PidController(), 0.9, 0.2, 20)
    assert all(a >= b for a, b in zip(outputs, outputs[1:], strict=False))
    assert min(outputs) >= 0.2 and abs(outputs[9] - 0.2) < 0.01


@given(
    kp=st.floats(0.05, 1.0),
    start=st.floats(0.0, 1.0),
    target=st.floats(0.0, 1.0),
)
def test_proportional_only_never_overshoots(kp, start, target):
    outputs = step_response(PidController(kp=kp), start, target, 50)
    sign = 1 if target >= start else -1
    assert all(sign * (b - a) >= -1e-12 for a, b in zip([start, *outputs], outputs, strict=False))
    assert all(sign * (x - target) <= 1e-12 for x in outputs)


def test_small_integral_gain_overshoots_by_a_small_bound_and_settles():
    outputs = step_response(PidController(kp=0.5, ki=0.05), 0.2, 0.9, 40)
    assert max(outputs) - 0.9 < 0.05
    assert all(abs(x - 0.9) < 0.01 for x in outputs[20:])


def test_anti_windup_keeps_a_saturated_integral_from_overshooting():
    # A small output limit saturates the controller for ~30 samples; an integral summing the error all that time
    # would carry the estimate 0.4 past the target (measured with the conditional integration removed).
    controller = PidController(kp=0.5, ki=0.05, output_limit=0.02, integral_limit=10)
    outputs = step_response(controller, 0.0, 0.6, 80)
    assert max(outputs) - 0.6 < 0.01
    assert abs(outputs[-1] - 0.6) < 0.001


def test_constant_input_stays_put():
    controller = PidController(kp=0.5, ki=0.05, kd=0.1)
    assert [controller.update(0.42) for _ in range(10)] == [0.42] * 10


def test_output_is_clamped_per_step_and_in_range():
    controller = PidController(kp=1.0, output_limit=0.1)
    controller.update(0.0)
    assert controller.update(1.0) == pytest.approx(0.1)
    assert PidController().update(1.7) == 1.0  # measurements outside [0, 1] are clamped too


def test_gains_are_validated():
    with pytest.raises(ValueError):
        PidController(kp=0)
    with pytest.raises(ValueError):
        PidController(ki=-0.1)


# --- bands and hysteresis --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("utilization", "drafts"), [(0.3, 3), (0.7, 5), (0.9, 3)])
def test_bands(utilization, drafts):
    decision = DraftCountPolicy().decide(utilization, "drafter llamacpp: 5/8 sequences busy")
    assert decision.num_drafts == drafts
    assert decision.utilization == utilization
    assert f"{utilization:.0%}" in decision.reason and "drafter llamacpp: 5/8 sequences busy" in decision.reason
    assert f"→ {drafts} drafts" in decision.reason


def test_band_boundaries_without_history():
    assert DraftCountPolicy().decide(0.5999).num_drafts == 3
    assert DraftCountPolicy().decide(0.60).num_drafts == 5
    assert DraftCountPolicy().decide(0.8499).num_drafts == 5
    assert DraftCountPolicy().decide(0.85).num_drafts == 3
    assert "saturated" in DraftCountPolicy().decide(0.85).reason


def test_hovering_at_a_boundary_does_not_flip_n():
    policy = DraftCountPolicy(margin=0.05)
    drafts = [policy.decide(u).num_drafts for u in [0.59, 0.61] * 10]
    assert drafts == [3] * 20


def test_hovering_at_the_upper_boundary_does_not_flip_n():
    policy = DraftCountPolicy(margin=0.05)
    drafts = [policy.decide(u).num_drafts for u in [0.86, 0.84] * 10]
    assert drafts == [3] * 20
    assert "held by hysteresis" in policy.current.reason


def test_crossing_by_the_margin_changes_band_both_ways():
    policy = DraftCountPolicy(margin=0.05)
    assert policy.decide(0.5).num_drafts == 3
    assert policy.decide(0.64).num_drafts == 3
    assert policy.decide(0.66).num_drafts == 5
    assert policy.decide(0.56).num_drafts == 5
    assert policy.decide(0.54).num_drafts == 3
    assert policy.decide(0.95).num_drafts == 3  # a jump past two boundaries goes straight to the top band
    assert "saturated" in policy.current.reason
    assert policy.decide(0.81).num_drafts == 3 and "saturated" in policy.current.reason
    assert policy.decide(0.79) == policy.current and policy.current.num_drafts == 5


# --- explicit num_drafts ---------------------------------------------------------------------------------------


def test_zero_means_automatic():
    policy = DraftCountPolicy()
    policy.decide(0.7)
    assert policy.resolve(0, max_drafts=8) == policy.current


def test_automatic_n_respects_the_limit():
    policy = DraftCountPolicy()
    policy.decide(0.7)
    decision = policy.resolve(0, max_drafts=4)
    assert decision.num_drafts == 4 and "limited to 4" in decision.reason


def test_explicit_num_drafts_overrides_and_is_clamped():
    policy = DraftCountPolicy()
    policy.decide(0.9)
    explicit = policy.resolve(2, max_drafts=8)
    assert explicit.num_drafts == 2 and "requested by the client" in explicit.reason
    clamped = policy.resolve(20, max_drafts=8)
    assert clamped.num_drafts == 8 and "requested by the client" in clamped.reason and "20" in clamped.reason
    assert policy.resolve(1, max_drafts=8).num_drafts == 1
    with pytest.raises(ValueError):
        policy.resolve(-1, max_drafts=8)


def test_before_any_sample_the_decision_is_the_low_band():
    decision = DraftCountPolicy().current
    assert decision.num_drafts == 3 and decision.utilization == 0.0


# --- the Drafter's load report ------------------------------------------------------------------------------------


def report(busy: int, queued: int = 0, capacity: int = 8, **gpu) -> EngineReport:
    return EngineReport("llamacpp", busy, queued, capacity, recent_tokens_per_second=41.0, **gpu)


def test_sequences_in_the_engine_against_its_capacity():
    utilization = report(5).utilization()
    assert utilization.value == pytest.approx(5 / 8) and utilization.source == "drafter"
    assert utilization.summary == "drafter llamacpp: 5/8 sequences busy, 0 queued, 41 tok/s"
    assert report(8, queued=3).utilization().value == 1.0  # a queue beyond capacity reads as full
    assert report(6, queued=1).utilization().value == pytest.approx(7 / 8)  # queued sequences count


def test_a_busy_gpu_outweighs_free_slots_and_the_reverse():
    gpu_bound = report(1, gpu_utilization=0.92, gpu_memory_utilization=0.40).utilization()
    assert gpu_bound.value == pytest.approx(0.92)
    assert gpu_bound.summary.endswith("; GPU 92%, memory 40%")
    memory_bound = report(1, gpu_utilization=0.10, gpu_memory_utilization=0.95).utilization()
    assert memory_bound.value == pytest.approx(0.95)
    slot_bound = report(7, gpu_utilization=0.20, gpu_memory_utilization=0.30).utilization()
    assert slot_bound.value == pytest.approx(7 / 8)
    assert slot_bound.details["gpu_utilization"] == 0.20 and slot_bound.details["sequences"] == pytest.approx(7 / 8)


def test_no_gpu_leaves_the_gpu_out():
    utilization = report(2).utilization()
    assert "GPU" not in utilization.summary and utilization.details["gpu_utilization"] is None


# --- the monitor ------------------------------------------------------------------------------------------------


class ReportingDrafter:
    """Stands in for the Drafter's GetLoad call (its real path is covered by tests/integration/test_load.py):
    returns the given reports, then repeats the last; an exception is raised as a failed call."""

    def __init__(self, reports: list[EngineReport | Exception]):
        self.reports = list(reports)
        self.calls = 0

    async def __call__(self) -> EngineReport:
        self.calls += 1
        value = self.reports.pop(0) if len(self.reports) > 1 else self.reports[0]
        if isinstance(value, Exception):
            raise value
        return value


def monitor_of(*reports: EngineReport | Exception) -> tuple[LoadMonitor, ReportingDrafter]:
    drafter = ReportingDrafter(list(reports))
    return LoadMonitor(DrafterLoadSampler(drafter)), drafter


def test_the_drafters_load_steers_n_through_the_controller():
    async def scenario():
        monitor, _ = monitor_of(report(1), *[report(6)] * 3, *[report(8, queued=4)] * 10, *[report(0)] * 10)
        decisions = [await monitor.step() for _ in range(24)]
        return monitor, decisions

    monitor, decisions = asyncio.run(scenario())
    drafts = [d.num_drafts for d in decisions]
    assert drafts[0] == 3  # 1 of 8 busy
    # 6/8 busy: the smoothed value climbs 12% → 44% → 59% → 67%; N follows once it is 5 points past 60 %.
    assert drafts[1:4] == [3, 3, 5]
    # Full, with a queue: 84% (5 points short of passing 85 %) → 92%, saturated: back to 3.
    assert drafts[4:14] == [5] + [3] * 9 and "saturated" in decisions[13].reason
    rising = [d.utilization for d in decisions[4:14]]
    assert rising == sorted(rising) and rising[-1] <= 1.0  # approaches full from below, never past it
    assert drafts[-1] == 3 and decisions[-1].utilization < 0.01  # idle again
    snapshot = monitor.snapshot()
    assert snapshot["source"] == "drafter" and snapshot["measured"]["details"]["busy_sequences"] == 0


def test_run_updates_current_and_is_cancellable():
    async def scenario():
        monitor, _ = monitor_of(report(1), report(8, gpu_utilization=0.95, gpu_memory_utilization=0.5))
        task = asyncio.create_task(monitor.run(interval_s=0.001))
        await wait_for(lambda: "saturated" in monitor.current().reason)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return monitor

    monitor = asyncio.run(scenario())
    decision = monitor.current()
    assert decision.num_drafts == 3 and "GPU 95%" in decision.reason
    snapshot = monitor.snapshot()
    assert snapshot["source"] == "drafter" and snapshot["consecutive_failures"] == 0
    assert snapshot["measured"]["details"]["gpu_utilization"] == 0.95


def test_an_unreachable_drafter_keeps_the_last_decision():
    async def scenario():
        monitor, drafter = monitor_of(report(6), ConnectionError("drafter unavailable"))
        task = asyncio.create_task(monitor.run(interval_s=0.001))
        await wait_for(lambda: drafter.calls >= 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return monitor

    monitor = asyncio.run(scenario())
    assert monitor.current().num_drafts == 5 and "75%" in monitor.current().reason
    snapshot = monitor.snapshot()
    assert snapshot["consecutive_failures"] >= 4 and "drafter unavailable" in snapshot["last_error"]


def test_monitor_resolve_and_snapshot():
    monitor, _ = monitor_of(report(5))
    asyncio.run(monitor.step())
    assert monitor.current().num_drafts == 5
    assert monitor.current().reason == (
        "utilization 62% (drafter llamacpp: 5/8 sequences busy, 0 queued, 41 tok/s) → 5 drafts"
    )
    assert monitor.resolve(7, max_drafts=8).num_drafts == 7
    snapshot = monitor.snapshot()
    assert snapshot["utilization"] == 0.625 and snapshot["measured"]["details"]["capacity"] == 8


async def wait_for(condition, timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.001)
