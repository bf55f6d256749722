"""The learned-weights store: where the Scheduler keeps what it learns (selection weights, feedback counters,
decisions awaiting feedback).

Two stores behind one interface (`StateStore`), chosen by `--state-url` / ``DELIBERATE_STATE_URL``:

- empty (the default): `FileStateStore`, one replica's `WeightLearner` saved to a local JSON file
  (``--weights-path``); `make run` needs no Redis.
- ``redis://host:port/db``: `RedisStateStore`, the same state in Redis, shared by every replica. Any replica
  accepts ``SubmitFeedback`` for a request another one solved; a refit happens once per ``refit_every``
  outcomes across all replicas; the weights survive every restart (as far as Redis persists its data).

Redis layout, every key under one prefix (default ``deliberate:scheduler:``):

    weights    hash  one field per learned weight (`weight_fields`), and generation (one more per refit window,
               applied or skipped)
    counters   hash  the `FeedbackCounters` fields
    pending    zset  request id -> when its decision was recorded (ms, Redis's clock)
    decisions  hash  request id -> the decision's features, a JSON row (`feature_row`)
    outcomes   list  outcome rows since the last claimed window: [score, agreement, latency, share, accepted]
    window     list  the `refit_every` outcomes claimed for the next refit, until one replica applies it
    lease:<n>  string  the holder of lease <n> (watchdog/lease.py's `RedisLease`), with an expiry

The learned weights are a vector named by signal (`weights.LEARNED`); the scripts know no weight by name: they
HMGET and HSET the fields they are given (ARGV), so a signal added to `LEARNED` is kept here with no change. Each
signal's field is its seed name where it has one (score -> ``alpha``, agreement -> ``beta``, answer_share ->
``delta``: `weights.SEED_NAMES`), else the signal's own name. So the hash a Scheduler before the named vector
wrote is the same hash: it reads as it is, and during a rolling upgrade old and new replicas read and write the
same three fields and share one generation number (an old replica's refit leaves a newer signal's field alone).
A field that is absent gives that weight its default.

Every change is one Lua script, so replicas never race on a read-modify-write. A refit has two steps because
the fit runs in Python: the submit that completes ``refit_every`` outcomes moves them into ``window``
atomically; then any replica that sees a window fits it (`refit_weights` is deterministic) and applies the
result with a check-and-set on ``generation``, so exactly one application wins. A replica that dies between
the steps leaves the window for the next submit, or the next start, to finish.

Pending decisions expire ``pending_ttl_s`` after they were recorded (Redis's clock; counted as ``expired``) and
are bounded by ``max_pending`` (oldest dropped first, counted as ``evicted``), as the file store bounds them.

Redis down: `weights_for_load` answers from the weights last read (solves go on), `record` logs and drops the
decision (its feedback will be refused as unknown), `submit` raises `StateUnavailable` (the server answers
``UNAVAILABLE``), `snapshot` answers with the state last read. Socket timeouts are short (``state_timeout_s``)
and a failed command is retried once, without backoff, so a dead Redis costs a request at most about twice that.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Protocol

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ..redis_client import describe, redis_client
from .weight_learner import (
    FeedbackCounters,
    WeightLearner,
    feature_row,
    features_from_row,
    learned_weights,
    restored_weights,
)
from .weights import LEARNED, SEED_NAMES, DecisionFeatures, Outcome, Weights, gamma_for_load, refit_weights

log = logging.getLogger("deliberate.scheduler.state")

DEFAULT_PREFIX = "deliberate:scheduler:"


class StateUnavailable(RuntimeError):
    """The shared state store cannot be reached; the message names it and says why."""


@dataclass(frozen=True)
class Submitted:
    """What `StateStore.submit` did with one piece of feedback."""

    found: bool  # False: no decision awaits feedback for that request (unknown, expired, evicted, already given)
    outcomes_until_refit: int


class StateStore(Protocol):
    name: str

    @property
    def where(self) -> str:
        """Where the state is kept, for logs and messages (no credentials)."""
        ...

    def weights_for_load(self, utilization: float) -> Weights:
        """The learned weights (as last read; never waits on I/O) with γ for the current load."""
        ...

    async def record(self, request_id: str, features: DecisionFeatures) -> None:
        """Remember what the answer to `request_id` was chosen on. Never raises: a solve does not fail on it."""
        ...

    async def submit(self, request_id: str, accepted: bool) -> Submitted:
        """Record the outcome of `request_id`'s answer; raises `StateUnavailable` when the store cannot."""
        ...

    async def snapshot(self) -> dict:
        """What GetState reports: weights, counters, pending, outcomes_until_refit (see `WeightLearner.snapshot`)."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


# --- the file store: one replica ----------------------------------------------------------------------------------


class FileStateStore:
    """A `WeightLearner` saved to a local file: the laptop default, one replica only."""

    name = "file"

    def __init__(self, learner: WeightLearner):
        self.learner = learner

    @classmethod
    def open(cls, path: str | Path, **options) -> FileStateStore:
        return cls(WeightLearner.load(path, **options))

    @property
    def where(self) -> str:
        return f"file {self.learner.path}" if self.learner.path else "memory only"

    def weights_for_load(self, utilization: float) -> Weights:
        return self.learner.weights_for_load(utilization)

    async def record(self, request_id: str, features: DecisionFeatures) -> None:
        self.learner.record(request_id, features)

    async def submit(self, request_id: str, accepted: bool) -> Submitted:
        found = self.learner.submit(request_id, accepted)
        return Submitted(found, self.learner.snapshot()["outcomes_until_refit"])

    async def snapshot(self) -> dict:
        return self.learner.snapshot()

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        self.learner.flush()


# --- the Redis store: every replica -------------------------------------------------------------------------------

# Shared by the scripts below: Redis's clock (one clock for every replica) and the expiry of pending decisions.
# KEYS[1..6] are always weights, counters, pending, decisions, outcomes, window.
_LUA_COMMON = """
local weights, counters, pending, decisions, outcomes, window = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function drop_expired(now, ttl_ms)
  local expired = redis.call('ZRANGEBYSCORE', pending, '-inf', now - ttl_ms, 'LIMIT', 0, 1000)
  if #expired > 0 then
    redis.call('ZREM', pending, unpack(expired))
    redis.call('HDEL', decisions, unpack(expired))
    redis.call('HINCRBY', counters, 'expired', #expired)
  end
end
-- Moves the oldest refit_every outcomes into the window when there are that many and no window is open.
local function claim_window(refit_every)
  if redis.call('EXISTS', window) == 0 and redis.call('LLEN', outcomes) >= refit_every then
    for _ = 1, refit_every do redis.call('LMOVE', outcomes, window, 'LEFT', 'RIGHT') end
  end
end
"""

# ARGV: request id, feature row (JSON), pending TTL (ms), max pending, then the weight fields. Returns their values.
_RECORD = (
    _LUA_COMMON
    + """
local now = now_ms()
drop_expired(now, tonumber(ARGV[3]))
redis.call('ZADD', pending, now, ARGV[1])
redis.call('HSET', decisions, ARGV[1], ARGV[2])
local over = redis.call('ZCARD', pending) - tonumber(ARGV[4])
if over > 0 then
  local oldest = redis.call('ZPOPMIN', pending, over)
  for i = 1, #oldest, 2 do redis.call('HDEL', decisions, oldest[i]) end
  redis.call('HINCRBY', counters, 'evicted', over)
end
return redis.call('HMGET', weights, unpack(ARGV, 5))
"""
)

# ARGV: request id, accepted (1/0), pending TTL (ms), refit_every, then the weight fields.
# Returns {found (1/0), outcomes since the window, window open (1/0), then the weight fields' values}.
_SUBMIT = (
    _LUA_COMMON
    + """
drop_expired(now_ms(), tonumber(ARGV[3]))
redis.call('HINCRBY', counters, 'submitted', 1)
local row = redis.call('HGET', decisions, ARGV[1])
local found = 0
if row then
  found = 1
  redis.call('ZREM', pending, ARGV[1])
  redis.call('HDEL', decisions, ARGV[1])
  local accepted = ARGV[2] == '1'
  redis.call('HINCRBY', counters, accepted and 'accepted' or 'rejected', 1)
  -- The row is a JSON array; append the outcome as text (cjson would round the floats).
  redis.call('RPUSH', outcomes, string.sub(row, 1, -2) .. ',' .. (accepted and 'true' or 'false') .. ']')
  claim_window(tonumber(ARGV[4]))
else
  redis.call('HINCRBY', counters, 'unknown_request', 1)
end
local reply = {found, redis.call('LLEN', outcomes), redis.call('EXISTS', window)}
-- An absent field is false here, not nil, so the table keeps every position.
for _, value in ipairs(redis.call('HMGET', weights, unpack(ARGV, 5))) do reply[#reply + 1] = value end
return reply
"""
)

# ARGV: the generation the fit started from, applied (1/0), refit_every, then field, value, field, value, …
# Returns 1 when this call applied the window, 0 when another replica already had; either way, whether a
# next window is open (a burst of feedback may have filled one meanwhile).
_APPLY_REFIT = (
    _LUA_COMMON
    + """
local applied = 0
local generation = tonumber(redis.call('HGET', weights, 'generation') or '0')
if generation == tonumber(ARGV[1]) and redis.call('EXISTS', window) == 1 then
  if ARGV[2] == '1' then
    redis.call('HSET', weights, unpack(ARGV, 4))
    redis.call('HINCRBY', counters, 'refits', 1)
  else
    redis.call('HINCRBY', counters, 'refits_skipped', 1)
  end
  redis.call('HINCRBY', weights, 'generation', 1)
  redis.call('DEL', window)
  applied = 1
end
claim_window(tonumber(ARGV[3]))
return {applied, redis.call('EXISTS', window)}
"""
)

# ARGV: pending TTL (ms), then the weight fields.
# Returns {the weight fields' values}, counters (flat), live pending, outcomes since the window.
_SNAPSHOT = (
    _LUA_COMMON
    + """
return {
  redis.call('HMGET', weights, unpack(ARGV, 2)),
  redis.call('HGETALL', counters),
  redis.call('ZCOUNT', pending, now_ms() - tonumber(ARGV[1]), '+inf'),
  redis.call('LLEN', outcomes),
}
"""
)

_KEY_NAMES = ("weights", "counters", "pending", "decisions", "outcomes", "window")
_COUNTER_NAMES = tuple(f.name for f in fields(FeedbackCounters))


def weight_fields() -> dict[str, str]:
    """Signal name -> its field in the weights hash, for every learned weight (`LEARNED`, read at each call)."""
    return {name: SEED_NAMES.get(name, name) for name in LEARNED}


class RedisStateStore:
    """The Scheduler's learned state in Redis, shared by every replica (module docstring: layout and failures)."""

    name = "redis"

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        refit_every: int = 100,
        blend: float = 0.3,
        max_pending: int = 10_000,
        pending_ttl_s: float = 86_400.0,
    ):
        if refit_every < 1 or max_pending < 1 or not 0.0 <= blend <= 1.0 or pending_ttl_s <= 0:
            raise ValueError("refit_every and max_pending must be >= 1, blend in [0, 1] and pending_ttl_s > 0")
        self.client = client
        self.prefix = prefix
        self.refit_every = refit_every
        self.blend = blend
        self.max_pending = max_pending
        self.pending_ttl_ms = int(pending_ttl_s * 1000)
        self.keys = [prefix + name for name in _KEY_NAMES]
        self.weights = Weights()  # as last read from Redis
        self.record_failures = 0  # decisions lost because Redis could not be reached (logged each time)
        self._refitting = asyncio.Lock()
        self._last_snapshot = self._snapshot_of(Weights(), FeedbackCounters(), pending=0, outcomes=0)
        self._record = client.register_script(_RECORD)
        self._submit = client.register_script(_SUBMIT)
        self._apply_refit = client.register_script(_APPLY_REFIT)
        self._read_snapshot = client.register_script(_SNAPSHOT)

    @classmethod
    def from_url(cls, url: str, timeout_s: float = 0.5, **options) -> RedisStateStore:
        return cls(redis_client(url, timeout_s), **options)

    @property
    def where(self) -> str:
        return describe(self.client)

    def weights_for_load(self, utilization: float) -> Weights:
        return self.weights.with_gamma(gamma_for_load(utilization))

    async def start(self) -> None:
        """Reads the shared weights and finishes a refit a replica left half done. A Redis that is down now is
        logged, not fatal: the replica serves with default weights and catches up on its first call."""
        try:
            await self.snapshot_or_raise()
            async with self._refitting:
                await self._finish_refits()
        except StateUnavailable as error:
            log.warning("starting with default weights: %s", error)

    async def close(self) -> None:
        await self.client.aclose()

    async def record(self, request_id: str, features: DecisionFeatures) -> None:
        if not request_id:
            raise ValueError("request_id must not be empty")
        row = json.dumps(feature_row(features), allow_nan=False, separators=(",", ":"))
        try:
            stored = await self._record(
                keys=self.keys, args=[request_id, row, self.pending_ttl_ms, self.max_pending, *weight_fields().values()]
            )
        except RedisError as error:
            self.record_failures += 1
            log.warning(
                "decision not recorded, its feedback will be refused: %s",
                self._unavailable(error),
                extra={"request_id": request_id},
            )
            return
        self._remember_weights(stored)

    async def submit(self, request_id: str, accepted: bool) -> Submitted:
        try:
            found, outcomes, window_open, *stored = await self._submit(
                keys=self.keys,
                args=[
                    request_id,
                    1 if accepted else 0,
                    self.pending_ttl_ms,
                    self.refit_every,
                    *weight_fields().values(),
                ],
            )
            self._remember_weights(stored)
            if window_open and not self._refitting.locked():  # else this process is at it already
                async with self._refitting:
                    await self._finish_refits()
        except RedisError as error:
            raise self._unavailable(error) from error
        return Submitted(bool(found), max(self.refit_every - int(outcomes), 0))

    async def snapshot(self) -> dict:
        """The shared state; with Redis down, the state last read (logged)."""
        try:
            return await self.snapshot_or_raise()
        except StateUnavailable as error:
            log.warning("GetState reports the state last read: %s", error)
            return self._last_snapshot

    async def snapshot_or_raise(self) -> dict:
        try:
            stored, flat_counters, pending, outcomes = await self._read_snapshot(
                keys=self.keys, args=[self.pending_ttl_ms, *weight_fields().values()]
            )
        except RedisError as error:
            raise self._unavailable(error) from error
        self._remember_weights(stored)
        counters = dict(zip(flat_counters[::2], (int(v) for v in flat_counters[1::2]), strict=True))
        known = FeedbackCounters(**{name: counters.get(name, 0) for name in _COUNTER_NAMES})
        self._last_snapshot = self._snapshot_of(self.weights, known, int(pending), int(outcomes))
        return self._last_snapshot

    def _snapshot_of(self, weights: Weights, counters: FeedbackCounters, pending: int, outcomes: int) -> dict:
        return {
            "weights": learned_weights(weights),
            "counters": asdict(counters),
            "pending": pending,
            "outcomes_until_refit": max(self.refit_every - outcomes, 0),
        }

    async def _finish_refits(self) -> None:
        """Fits and applies every open window (normally one). Racing replicas compute the same weights from the
        same window; the generation check lets exactly one of them apply it."""
        window_open = True
        while window_open:
            stored_as = weight_fields()
            async with self.client.pipeline(transaction=True) as read:
                read.hmget(self.keys[0], *stored_as.values(), "generation")
                read.lrange(self.keys[5], 0, -1)
                (*stored, generation), rows = await read.execute()
            if not rows:
                return
            current = self._weights_from(stored)
            outcomes = [Outcome(features_from_row(row[:-1]), bool(row[-1])) for row in map(json.loads, rows)]
            refitted = refit_weights(current, outcomes, self.blend)
            learned = (refitted or current).by_signal
            applied, window_open = await self._apply_refit(
                keys=self.keys,
                args=[
                    generation or 0,
                    0 if refitted is None else 1,
                    self.refit_every,
                    *(item for name, field in stored_as.items() for item in (field, repr(learned[name]))),
                ],
            )
            if applied:
                self.weights = refitted or current

    def _remember_weights(self, stored: list) -> None:
        self.weights = self._weights_from(stored)

    @staticmethod
    def _weights_from(stored: list) -> Weights:
        """The learned weights from HMGET of `weight_fields` (in that order); an absent field (None: before the
        first refit, or a signal added since) gives that weight its default. Refuses values not finite and >= 0."""
        present = {name: value for name, value in zip(weight_fields(), stored, strict=True) if value is not None}
        return restored_weights(present)

    def _unavailable(self, error: RedisError) -> StateUnavailable:
        return StateUnavailable(f"state store {self.where} is unavailable: {type(error).__name__}: {error}")
