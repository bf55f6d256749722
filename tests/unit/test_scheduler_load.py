"""The Scheduler's load balancer: samplers, the PID controller, draft-count bands with hysteresis, the monitor loop."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deliberate.scheduler.load import (
    CpuSampler,
    DraftCountPolicy,
    EngineSampler,
    LoadMonitor,
    MaxSampler,
    NvmlSampler,
    PidController,
    Utilization,
    best_sampler,
)

no_gpu = pytest.mark.skipif(NvmlSampler.available(), reason="a GPU is present: NVML does the sampling")

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


@pytest.mark.parametrize(("utilization", "drafts", "fast"), [(0.3, 3, False), (0.7, 5, False), (0.9, 3, True)])
def test_bands(utilization, drafts, fast):
    decision = DraftCountPolicy().decide(utilization, "engine: 5/8 sequences in flight")
    assert (decision.num_drafts, decision.fast_mode) == (drafts, fast)
    assert decision.utilization == utilization
    assert f"{utilization:.0%}" in decision.reason and "engine: 5/8 sequences in flight" in decision.reason
    assert f"→ {drafts} drafts" in decision.reason


def test_band_boundaries_without_history():
    assert DraftCountPolicy().decide(0.5999).num_drafts == 3
    assert DraftCountPolicy().decide(0.60).num_drafts == 5
    assert DraftCountPolicy().decide(0.8499).fast_mode is False
    assert DraftCountPolicy().decide(0.85).fast_mode is True


def test_hovering_at_a_boundary_does_not_flip_n():
    policy = DraftCountPolicy(margin=0.05)
    drafts = [policy.decide(u).num_drafts for u in [0.59, 0.61] * 10]
    assert drafts == [3] * 20


def test_hovering_at_the_upper_boundary_does_not_flip_fast_mode():
    policy = DraftCountPolicy(margin=0.05)
    modes = [policy.decide(u).fast_mode for u in [0.86, 0.84] * 10]
    assert modes == [True] * 20
    assert "held by hysteresis" in policy.current.reason


def test_crossing_by_the_margin_changes_band_both_ways():
    policy = DraftCountPolicy(margin=0.05)
    assert policy.decide(0.5).num_drafts == 3
    assert policy.decide(0.64).num_drafts == 3
    assert policy.decide(0.66).num_drafts == 5
    assert policy.decide(0.56).num_drafts == 5
    assert policy.decide(0.54).num_drafts == 3
    assert policy.decide(0.95).fast_mode is True  # a jump past two boundaries goes straight to the top band
    assert policy.decide(0.81).fast_mode is True
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
    assert explicit.fast_mode is True  # the load still decides the precision
    clamped = policy.resolve(20, max_drafts=8)
    assert clamped.num_drafts == 8 and "requested by the client" in clamped.reason and "20" in clamped.reason
    assert policy.resolve(1, max_drafts=8).num_drafts == 1
    with pytest.raises(ValueError):
        policy.resolve(-1, max_drafts=8)


def test_before_any_sample_the_decision_is_the_low_band():
    decision = DraftCountPolicy().current
    assert (decision.num_drafts, decision.fast_mode) == (3, False)


# --- samplers ---------------------------------------------------------------------------------------------------


@no_gpu
def test_nvml_is_not_available_here_and_says_so_without_raising():
    assert NvmlSampler.available() is False


def test_cpu_sampler_returns_a_share():
    sampler = CpuSampler()
    sum(i * i for i in range(200_000))  # some work between the samples
    for _ in range(3):
        utilization = sampler.sample()
        assert 0.0 <= utilization.value <= 1.0
        assert utilization.source == "cpu" and utilization.summary.startswith("cpu:")


def test_cpu_sampler_falls_back_to_load_average(tmp_path):
    utilization = CpuSampler(proc_stat=str(tmp_path / "missing")).sample()
    assert 0.0 <= utilization.value <= 1.0 and utilization.details["method"] == "loadavg"


def test_cpu_sampler_measures_the_delta_between_samples(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    sampler = CpuSampler(proc_stat=str(stat))
    stat.write_text("cpu  130 0 130 840 0 0 0 0 0 0\n")  # 60 busy of 100 ticks since the last read
    assert sampler.sample().value == pytest.approx(0.6)
    assert sampler.sample().value == pytest.approx(0.6)  # no ticks since: the last value, not a division by zero


def test_engine_sampler_counts_begin_and_end():
    engine = EngineSampler(capacity=8)
    engine.begin(5)
    sample = engine.sample()
    assert sample.value == pytest.approx(5 / 8) and sample.source == "engine"
    assert sample.summary == "engine: 5/8 sequences in flight"
    engine.begin(5)
    assert engine.sample().value == 1.0 and engine.in_flight == 10  # over capacity reads as full
    engine.end(10)
    assert engine.sample().value == 0.0
    with engine.track(3):
        assert engine.in_flight == 3
    assert engine.in_flight == 0
    with pytest.raises(ValueError):
        engine.end(1)


def test_max_sampler_reports_the_busier_source():
    engine = EngineSampler(capacity=8)
    engine.begin(6)
    idle = FakeSampler([Utilization(0.1, "cpu", {}, "cpu: 10% busy")])
    sample = MaxSampler([engine, idle]).sample()
    assert sample.value == pytest.approx(0.75) and sample.source == "engine"
    assert set(sample.details) == {"engine", "cpu"}
    assert sample.summary == "engine: 6/8 sequences in flight; cpu: 10% busy"


@no_gpu
def test_best_sampler_without_gpu_combines_engine_and_cpu():
    engine = EngineSampler(capacity=8)
    sampler = best_sampler(engine)
    assert isinstance(sampler, MaxSampler) and sampler.samplers[0] is engine
    assert sampler.sample().source in ("engine", "cpu")


# --- the monitor ------------------------------------------------------------------------------------------------


class FakeSampler:
    """Stands in for a GPU that cannot be made to appear here: returns the given values, then repeats the last."""

    def __init__(self, values: list[Utilization | Exception]):
        self.values = list(values)
        self.calls = 0

    def sample(self) -> Utilization:
        self.calls += 1
        value = self.values.pop(0) if len(self.values) > 1 else self.values[0]
        if isinstance(value, Exception):
            raise value
        return value


def gpu(value: float) -> Utilization:
    return Utilization(value, "nvml", {"gpu": value, "memory": 0.1}, f"nvml: GPU {value:.0%}, memory 10%")


async def wait_for(condition, timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.001)


def test_run_updates_current_and_is_cancellable():
    async def scenario():
        sampler = FakeSampler([gpu(0.2), gpu(0.95)])
        monitor = LoadMonitor(sampler)
        task = asyncio.create_task(monitor.run(interval_s=0.001))
        await wait_for(lambda: monitor.current().fast_mode)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return monitor

    monitor = asyncio.run(scenario())
    decision = monitor.current()
    assert decision.num_drafts == 3 and decision.fast_mode and "nvml: GPU 95%" in decision.reason
    snapshot = monitor.snapshot()
    assert snapshot["source"] == "nvml" and snapshot["fast_mode"] is True and snapshot["consecutive_failures"] == 0
    assert snapshot["measured"]["details"]["gpu"] == 0.95


def test_a_failing_sampler_keeps_the_last_decision():
    async def scenario():
        sampler = FakeSampler([gpu(0.7), RuntimeError("NVML went away")])
        monitor = LoadMonitor(sampler)
        task = asyncio.create_task(monitor.run(interval_s=0.001))
        await wait_for(lambda: sampler.calls >= 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return monitor

    monitor = asyncio.run(scenario())
    assert monitor.current().num_drafts == 5 and "70%" in monitor.current().reason
    snapshot = monitor.snapshot()
    assert snapshot["consecutive_failures"] >= 4 and "NVML went away" in snapshot["last_error"]


def test_monitor_resolve_and_snapshot_with_engine():
    engine = EngineSampler(capacity=8)
    monitor = LoadMonitor(engine, engine=engine)
    engine.begin(5)
    monitor.step()
    assert monitor.current().num_drafts == 5
    assert monitor.current().reason == "utilization 62% (engine: 5/8 sequences in flight) → 5 drafts"
    assert monitor.resolve(7, max_drafts=8).num_drafts == 7
    snapshot = monitor.snapshot()
    assert snapshot["in_flight"] == 5 and snapshot["capacity"] == 8 and snapshot["utilization"] == 0.625


@no_gpu
def test_for_this_machine_wires_the_engine_into_the_sampler():
    monitor = LoadMonitor.for_this_machine(capacity=4)
    assert monitor.engine is not None and monitor.engine.capacity == 4
    monitor.engine.begin(4)
    assert monitor.step().fast_mode is True  # 4/4 in flight without a GPU reads as full
