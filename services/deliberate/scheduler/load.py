"""How many drafts to generate per request, from how busy the accelerator is. Pure domain code, no gRPC.

Every `interval_s` (5 s by default) the LoadMonitor samples utilization:

- `nvml`: GPU utilization and memory through nvidia-ml-py, when a GPU is present;
- otherwise engine-side signals: in-flight draft sequences against capacity (`engine`) and CPU busy share (`cpu`).

A PID controller smooths the measurement, and the DraftCountPolicy maps the smoothed value to N with hysteresis:
below 60 % → 3 drafts, 60–85 % → 5, 85 % and above → 3 plus fast mode for the Drafter (FP16, FlashAttention-2 where
the engine supports them). A request's explicit num_drafts overrides N within the server's limits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Protocol

log = logging.getLogger("deliberate.load")


@dataclass(frozen=True)
class Utilization:
    value: float  # 0..1; the busier resource when a sampler looks at several
    source: str  # "nvml" | "engine" | "cpu"
    details: dict = field(default_factory=dict)
    summary: str = ""  # in words, e.g. "engine: 5/8 sequences in flight"


class Sampler(Protocol):
    def sample(self) -> Utilization: ...


def _clamp(value: float, lower: float = 0.0, upper: float = 1.0) -> float:
    return min(upper, max(lower, value))


# --- samplers --------------------------------------------------------------------------------------------------------


class NvmlSampler:
    """GPU utilization and memory share through NVML; the busiest GPU on either measure counts.

    Memory counts as well as compute because a GPU whose memory is nearly full cannot take more sequences even
    while its cores wait on the host.
    """

    def __init__(self) -> None:
        import pynvml  # optional dependency (the `scheduler` extra); only imported when a GPU is in play

        self._nvml = pynvml
        pynvml.nvmlInit()  # once: every sample reuses the handles
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        if not self._handles:
            pynvml.nvmlShutdown()
            raise RuntimeError("NVML found no GPU")

    @staticmethod
    def available() -> bool:
        """Whether NVML sees at least one GPU. Never raises: a missing driver or library means "no GPU"."""
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:  # ImportError, NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
            return False
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        except Exception:
            return False
        finally:
            try:
                pynvml.nvmlShutdown()
            except Exception:
                pass

    def sample(self) -> Utilization:
        gpus = []
        for index, handle in enumerate(self._handles):
            rates = self._nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append({"index": index, "gpu": rates.gpu / 100, "memory": memory.used / memory.total})
        gpu = max(g["gpu"] for g in gpus)
        memory = max(g["memory"] for g in gpus)
        count = f" (busiest of {len(gpus)} GPUs)" if len(gpus) > 1 else ""
        return Utilization(
            _clamp(max(gpu, memory)),
            "nvml",
            {"gpu": gpu, "memory": memory, "gpus": gpus},
            f"nvml: GPU {gpu:.0%}, memory {memory:.0%}{count}",
        )

    def close(self) -> None:
        self._nvml.nvmlShutdown()


class EngineSampler:
    """In-flight draft sequences against what the engine runs at once; the Scheduler counts them itself.

    The Scheduler calls `begin(n)` before a drafting call with n sequences and `end(n)` after it (or uses
    `track(n)`), so the count is right even when the Drafter runs on another machine.
    """

    def __init__(self, capacity: int = 8):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._in_flight = 0
        self._lock = threading.Lock()  # begin/end may come from more than one thread

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def begin(self, n: int) -> None:
        with self._lock:
            self._in_flight += n

    def end(self, n: int) -> None:
        with self._lock:
            if n > self._in_flight:
                raise ValueError(f"end({n}) with only {self._in_flight} sequences in flight")
            self._in_flight -= n

    @contextmanager
    def track(self, n: int) -> Iterator[None]:
        self.begin(n)
        try:
            yield
        finally:
            self.end(n)

    def sample(self) -> Utilization:
        in_flight = self._in_flight
        return Utilization(
            _clamp(in_flight / self.capacity),  # a queue beyond capacity is still "full"
            "engine",
            {"in_flight": in_flight, "capacity": self.capacity},
            f"engine: {in_flight}/{self.capacity} sequences in flight",
        )


class CpuSampler:
    """System CPU busy share between two samples, from /proc/stat; load average per core where that is missing."""

    def __init__(self, proc_stat: str = "/proc/stat"):
        self._proc_stat = proc_stat
        self._last = self._read()  # the first sample measures from here, not from boot
        self._last_value = 0.0

    def _read(self) -> tuple[int, int] | None:
        """(busy, total) jiffies since boot, or None where /proc/stat is not there (macOS, some sandboxes)."""
        try:
            with open(self._proc_stat) as f:
                fields = f.readline().split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu":
            return None
        # user nice system idle iowait irq softirq steal; guest time is already inside user and nice
        ticks = [int(x) for x in fields[1:9]]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # waiting on I/O leaves the CPU free
        total = sum(ticks)
        return total - idle, total

    def sample(self) -> Utilization:
        now = self._read()
        if now is None or self._last is None:
            return self._load_average()
        busy = now[0] - self._last[0]
        total = now[1] - self._last[1]
        if total > 0:  # two samples within one tick measure nothing new: repeat the last value
            self._last, self._last_value = now, _clamp(busy / total)
        value = self._last_value
        return Utilization(value, "cpu", {"busy": value, "method": "proc_stat"}, f"cpu: {value:.0%} busy")

    @staticmethod
    def _load_average() -> Utilization:
        cores = os.cpu_count() or 1
        load = os.getloadavg()[0]
        return Utilization(
            _clamp(load / cores),
            "cpu",
            {"load_1m": load, "cores": cores, "method": "loadavg"},
            f"cpu: load {load:.2f} on {cores} cores",
        )


class MaxSampler:
    """The busiest of several samplers.

    Max, not mean: engine and CPU measure different bottlenecks, and a request is slowed by whichever is nearer
    saturation. Averaging would let an idle CPU hide a full engine (or the reverse) and add drafts to a machine that
    cannot run them.
    """

    def __init__(self, samplers: Sequence[Sampler]):
        if not samplers:
            raise ValueError("MaxSampler needs at least one sampler")
        self.samplers = list(samplers)

    def sample(self) -> Utilization:
        samples = [s.sample() for s in self.samplers]
        busiest = max(samples, key=lambda u: u.value)  # first one wins a tie: engine before cpu
        details = {u.source: {"value": u.value, **u.details} for u in samples}
        summary = "; ".join([busiest.summary] + [u.summary for u in samples if u is not busiest])
        return Utilization(busiest.value, busiest.source, details, summary)


def best_sampler(engine: EngineSampler) -> Sampler:
    """NVML when a GPU is present, else the busier of the engine's in-flight share and the CPU.

    Takes the EngineSampler rather than its capacity because the Scheduler must hold the same instance to call
    `begin`/`end` around each drafting call.
    """
    if NvmlSampler.available():
        try:
            return NvmlSampler()
        except Exception as error:  # seen a moment ago, gone now: fall back rather than fail the Scheduler's start
            log.warning("NVML available but not usable (%s); using engine and CPU signals", error)
    return MaxSampler([engine, CpuSampler()])


# --- control ---------------------------------------------------------------------------------------------------------


class PidController:
    """Steers a smoothed estimate towards the measured utilization: each update, estimate += PID(measured − estimate).

    Why this design settles without oscillating: the estimate integrates the controller's output, so the loop already
    contains an integrator and the proportional term alone reaches zero steady-state error. With only kp, the error
    shrinks by a factor (1 − kp) every update — geometric and, for 0 < kp ≤ 1, monotone: a step from 0.2 to 0.9
    approaches 0.9 from below and never crosses it. Driving N directly from a PID on the bands instead would put a
    discontinuous, integer-valued plant inside the loop, which is what makes controllers hunt between values.

    The other terms are there for tuning and default to off:

    - ki removes the lag behind a steadily rising load (a ramp), but on an integrating loop any integral term
      overshoots a step once (the error's running sum must come back to zero). Keep (2 − kp − ki)² ≥ 4(1 − kp) so the
      loop stays overdamped (for kp = 0.5: ki ≤ 0.086); anti-windup keeps the overshoot small: the integral is bounded
      by `integral_limit` and frozen while the output or the estimate is saturated.
    - kd acts on the estimate rather than the error, so a jump in the measurement gives no derivative kick.

    Gains are per update: the monitor samples at a fixed interval. The output (the change per update) is clamped to
    ±`output_limit`, and the estimate to [lower, upper].
    """

    def __init__(
        self,
        kp: float = 0.5,
        ki: float = 0.0,
        kd: float = 0.0,
        *,
        output_limit: float = 1.0,
        integral_limit: float = 0.5,
        lower: float = 0.0,
        upper: float = 1.0,
    ):
        if kp <= 0 or ki < 0 or kd < 0:
            raise ValueError(f"gains must be kp > 0, ki ≥ 0, kd ≥ 0; got kp={kp}, ki={ki}, kd={kd}")
        self.kp, self.ki, self.kd = kp, ki, kd
        self.output_limit = output_limit
        self.integral_limit = integral_limit
        self.lower, self.upper = lower, upper
        self.reset()

    def reset(self, value: float | None = None) -> None:
        """Forgets the history; the next update seeds the estimate with the measurement unless `value` is given."""
        self._value = None if value is None else _clamp(value, self.lower, self.upper)
        self._previous: float | None = None
        self._integral = 0.0

    @property
    def value(self) -> float | None:
        return self._value

    def update(self, setpoint: float) -> float:
        """Takes one measurement as the setpoint and returns the new estimate."""
        setpoint = _clamp(setpoint, self.lower, self.upper)
        if self._value is None:  # the first sample is the best estimate there is; ramping up from 0 would lag
            self._value = setpoint
            return setpoint
        error = setpoint - self._value
        change = 0.0 if self._previous is None else self._value - self._previous
        integral = _clamp(self._integral + error, -self.integral_limit, self.integral_limit)
        raw = self.kp * error + self.ki * integral - self.kd * change
        output = _clamp(raw, -self.output_limit, self.output_limit)
        value = _clamp(self._value + output, self.lower, self.upper)
        if output == raw and value == self._value + output:  # anti-windup: integrate only while unsaturated
            self._integral = integral
        self._previous, self._value = self._value, value
        return value


@dataclass(frozen=True)
class Decision:
    num_drafts: int
    fast_mode: bool
    reason: str
    utilization: float  # the controlled (smoothed) value the decision rests on


# Bands from low to high load: (lower bound, drafts, fast mode).
BANDS: list[tuple[float, int, bool]] = [(0.0, 3, False), (0.60, 5, False), (0.85, 3, True)]


def band_of(utilization: float) -> int:
    """Index into BANDS for a utilization, without hysteresis."""
    return max(i for i, (lower, _, _) in enumerate(BANDS) if utilization >= lower or i == 0)


class DraftCountPolicy:
    """Maps controlled utilization to N drafts and fast mode, with hysteresis.

    A band is left only when the signal is `margin` past the boundary: moving up from 3 drafts needs 65 %, moving
    back down from 5 needs under 55 %. A signal hovering at 60 % therefore keeps whatever N it has.

    Under high load N drops back to 3 and the Drafter is asked for fast mode, so requests keep their latency instead
    of queueing behind each other's drafts.
    """

    def __init__(self, margin: float = 0.05):
        self.margin = margin
        self._band: int | None = None
        self._current = Decision(BANDS[0][1], BANDS[0][2], "no utilization sample yet", 0.0)

    @property
    def current(self) -> Decision:
        return self._current

    def decide(self, utilization: float, summary: str = "") -> Decision:
        """The automatic decision for a new controlled utilization; becomes `current`."""
        plain = band_of(utilization)
        if self._band is None:
            band = plain
        elif band_of(utilization - self.margin) > self._band:
            band = band_of(utilization - self.margin)
        elif band_of(utilization + self.margin) < self._band:
            band = band_of(utilization + self.margin)
        else:
            band = self._band
        self._band = band
        _, drafts, fast = BANDS[band]
        measured = f" ({summary})" if summary else ""
        held = " (held by hysteresis)" if band != plain else ""
        mode = " in fast mode" if fast else ""
        reason = f"utilization {utilization:.0%}{measured} → {drafts} drafts{mode}{held}"
        self._current = Decision(drafts, fast, reason, utilization)
        return self._current

    def resolve(self, requested: int, max_drafts: int) -> Decision:
        """N for one request: the client's num_drafts clamped to [1, max_drafts], or the automatic one for 0.

        Fast mode always follows the load: the client chooses how many drafts, not how precisely they are computed.
        """
        if requested < 0:
            raise ValueError(f"num_drafts must be 0 (automatic) or positive, got {requested}")
        auto = self._current
        if requested == 0:
            if auto.num_drafts <= max_drafts:
                return auto
            return Decision(max_drafts, auto.fast_mode, f"{auto.reason}, limited to {max_drafts}", auto.utilization)
        drafts = min(requested, max_drafts)
        limited = f" (asked for {requested}, limited to {max_drafts})" if drafts != requested else ""
        reason = f"{drafts} drafts requested by the client{limited}"
        return Decision(drafts, auto.fast_mode, reason, auto.utilization)


# --- the monitor -----------------------------------------------------------------------------------------------------


class LoadMonitor:
    """Samples, smooths and decides every interval; the Scheduler reads `current()` or `resolve()` per request."""

    def __init__(
        self,
        sampler: Sampler,
        controller: PidController | None = None,
        policy: DraftCountPolicy | None = None,
        engine: EngineSampler | None = None,
    ):
        self.sampler = sampler
        self.controller = controller or PidController()
        self.policy = policy or DraftCountPolicy()
        self.engine = engine  # shown in snapshot() even when NVML does the measuring
        self._measured: Utilization | None = None
        self._sampled_at: float | None = None
        self._failures = 0
        self._last_error = ""

    @classmethod
    def for_this_machine(cls, capacity: int = 8) -> LoadMonitor:
        """NVML where there is a GPU, engine and CPU signals otherwise; `monitor.engine` takes begin/end."""
        engine = EngineSampler(capacity)
        return cls(best_sampler(engine), engine=engine)

    def step(self) -> Decision:
        """One sample → controller → policy. Raises what the sampler raises."""
        measured = self.sampler.sample()
        controlled = self.controller.update(measured.value)
        decision = self.policy.decide(controlled, measured.summary)
        self._measured, self._sampled_at = measured, time.time()
        self._failures, self._last_error = 0, ""
        return decision

    async def run(self, interval_s: float = 5.0) -> None:
        """Samples every `interval_s` until cancelled. A failed sample is logged and the last decision kept."""
        while True:
            try:
                self.step()
            except Exception as error:
                self._failures += 1
                self._last_error = f"{type(error).__name__}: {error}"
                log.warning("load sample failed (%d in a row), keeping the last decision: %s", self._failures, error)
            await asyncio.sleep(interval_s)

    def current(self) -> Decision:
        return self.policy.current

    def resolve(self, requested: int, max_drafts: int) -> Decision:
        return self.policy.resolve(requested, max_drafts)

    def snapshot(self) -> dict:
        """Plain data for GetState: the decision, what was measured, and whether sampling is failing."""
        decision = self.policy.current
        measured = self._measured
        return {
            **asdict(decision),
            "source": measured.source if measured else "",
            "measured": asdict(measured) if measured else None,
            "sampled_at": self._sampled_at,
            "in_flight": self.engine.in_flight if self.engine else None,
            "capacity": self.engine.capacity if self.engine else None,
            "consecutive_failures": self._failures,
            "last_error": self._last_error,
        }
