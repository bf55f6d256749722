"""How many drafts to generate per request, from how busy the Drafter's engine is. Pure domain code, no gRPC.

Every `interval_s` (5 s by default) the LoadMonitor asks its sampler for utilization. The Scheduler's sampler
is the Drafter's own report (`DrafterService.GetLoad`): sequences busy and queued against the engine's
capacity, and GPU utilization and memory where NVML sees a GPU in the Drafter's process — the busiest of
these counts. A PID controller smooths the measurement, and the DraftCountPolicy maps the smoothed value to N
with hysteresis: below 60 % → 3 drafts, 60–85 % → 5, 85 % and above → 3 (the engine is saturated: fewer
sequences keep each request's latency). A request's explicit num_drafts overrides N within the server's limits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Protocol

from ..core.stats import clamp

log = logging.getLogger("deliberate.load")


@dataclass(frozen=True)
class Utilization:
    value: float  # 0..1; the busier resource when a sampler looks at several
    source: str  # "drafter"
    details: dict = field(default_factory=dict)
    summary: str = ""  # in words, e.g. "drafter llamacpp: 5/8 sequences busy, 0 queued, 41 tok/s"


class Sampler(Protocol):
    async def sample(self) -> Utilization: ...


# --- the Drafter's report --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineReport:
    """What the Drafter reports about its engine (`GetLoadResponse`), as plain data."""

    engine: str
    busy_sequences: int
    queued_sequences: int
    capacity: int
    recent_tokens_per_second: float = 0.0
    gpu_utilization: float | None = None
    gpu_memory_utilization: float | None = None

    def utilization(self) -> Utilization:
        """The busiest of: sequences in the engine (busy + queued) against its capacity, GPU compute, GPU memory.

        Max, not mean: a request is slowed by whichever resource is nearer saturation; averaging would let an
        idle GPU hide full slots (or the reverse) and add drafts to an engine that cannot run them.
        """
        in_engine = self.busy_sequences + self.queued_sequences
        sequences = clamp(in_engine / max(1, self.capacity))  # a queue beyond capacity is still "full"
        gpu = [u for u in (self.gpu_utilization, self.gpu_memory_utilization) if u is not None]
        summary = (
            f"drafter {self.engine}: {self.busy_sequences}/{self.capacity} sequences busy, "
            f"{self.queued_sequences} queued, {self.recent_tokens_per_second:.0f} tok/s"
        )
        if gpu:
            summary += f"; GPU {self.gpu_utilization or 0:.0%}, memory {self.gpu_memory_utilization or 0:.0%}"
        return Utilization(max([sequences, *gpu]), "drafter", {**asdict(self), "sequences": sequences}, summary)


class DrafterLoadSampler:
    """Samples by asking the Drafter for its report (`fetch`, the Scheduler's GetLoad call); a failed call
    raises, and the monitor keeps its last decision."""

    def __init__(self, fetch: Callable[[], Awaitable[EngineReport]]):
        self.fetch = fetch

    async def sample(self) -> Utilization:
        return (await self.fetch()).utilization()


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
        self._value = None if value is None else clamp(value, self.lower, self.upper)
        self._previous: float | None = None
        self._integral = 0.0

    @property
    def value(self) -> float | None:
        return self._value

    def update(self, setpoint: float) -> float:
        """Takes one measurement as the setpoint and returns the new estimate."""
        setpoint = clamp(setpoint, self.lower, self.upper)
        if self._value is None:  # the first sample is the best estimate there is; ramping up from 0 would lag
            self._value = setpoint
            return setpoint
        error = setpoint - self._value
        change = 0.0 if self._previous is None else self._value - self._previous
        integral = clamp(self._integral + error, -self.integral_limit, self.integral_limit)
        raw = self.kp * error + self.ki * integral - self.kd * change
        output = clamp(raw, -self.output_limit, self.output_limit)
        value = clamp(self._value + output, self.lower, self.upper)
        if output == raw and value == self._value + output:  # anti-windup: integrate only while unsaturated
            self._integral = integral
        self._previous, self._value = self._value, value
        return value


@dataclass(frozen=True)
class Decision:
    num_drafts: int
    reason: str
    utilization: float  # the controlled (smoothed) value the decision rests on


# Bands from low to high load: (lower bound, drafts, in words).
BANDS: list[tuple[float, int, str]] = [(0.0, 3, ""), (0.60, 5, ""), (0.85, 3, "saturated")]


def band_of(utilization: float) -> int:
    """Index into BANDS for a utilization, without hysteresis."""
    return max(i for i, (lower, _, _) in enumerate(BANDS) if utilization >= lower or i == 0)


class DraftCountPolicy:
    """Maps controlled utilization to N drafts, with hysteresis.

    A band is left only when the signal is `margin` past the boundary: moving up from 3 drafts needs 65 %, moving
    back down from 5 needs under 55 %. A signal hovering at 60 % therefore keeps whatever N it has.

    Under high load N drops back to 3, so requests keep their latency instead of queueing behind each other's
    drafts.
    """

    def __init__(self, margin: float = 0.05):
        self.margin = margin
        self._band: int | None = None
        self._current = Decision(BANDS[0][1], "no utilization sample yet", 0.0)

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
        _, drafts, words = BANDS[band]
        measured = f" ({summary})" if summary else ""
        held = " (held by hysteresis)" if band != plain else ""
        state = f", {words}" if words else ""
        reason = f"utilization {utilization:.0%}{measured} → {drafts} drafts{state}{held}"
        self._current = Decision(drafts, reason, utilization)
        return self._current

    def resolve(self, requested: int, max_drafts: int) -> Decision:
        """N for one request: the client's num_drafts clamped to [1, max_drafts], or the automatic one for 0."""
        if requested < 0:
            raise ValueError(f"num_drafts must be 0 (automatic) or positive, got {requested}")
        auto = self._current
        if requested == 0:
            if auto.num_drafts <= max_drafts:
                return auto
            return Decision(max_drafts, f"{auto.reason}, limited to {max_drafts}", auto.utilization)
        drafts = min(requested, max_drafts)
        limited = f" (asked for {requested}, limited to {max_drafts})" if drafts != requested else ""
        reason = f"{drafts} drafts requested by the client{limited}"
        return Decision(drafts, reason, auto.utilization)


# --- the monitor -----------------------------------------------------------------------------------------------------


class LoadMonitor:
    """Samples, smooths and decides every interval; the Scheduler reads `current()` or `resolve()` per request."""

    def __init__(
        self,
        sampler: Sampler,
        controller: PidController | None = None,
        policy: DraftCountPolicy | None = None,
    ):
        self.sampler = sampler
        self.controller = controller or PidController()
        self.policy = policy or DraftCountPolicy()
        self._measured: Utilization | None = None
        self._sampled_at: float | None = None
        self._failures = 0
        self._last_error = ""

    async def step(self) -> Decision:
        """One sample → controller → policy. Raises what the sampler raises."""
        measured = await self.sampler.sample()
        controlled = self.controller.update(measured.value)
        decision = self.policy.decide(controlled, measured.summary)
        self._measured, self._sampled_at = measured, time.time()
        self._failures, self._last_error = 0, ""
        return decision

    async def run(self, interval_s: float = 5.0) -> None:
        """Samples every `interval_s` until cancelled. A failed sample is logged and the last decision kept."""
        while True:
            try:
                await self.step()
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
            "consecutive_failures": self._failures,
            "last_error": self._last_error,
        }
