"""The watchdog's lease in Redis: one acting watchdog among Scheduler replicas that watch one Verifier.

Only the holder of the lease restarts the Verifier (watchdog.py); the others keep probing. It lives in the state
store's Redis, under the store's prefix (``lease:<name>``: `scheduler/__main__.py` names it), with an expiry.
"""

from __future__ import annotations

import logging
import time

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ..redis_client import describe

log = logging.getLogger("deliberate.scheduler.lease")

# ARGV: holder, TTL (ms). Extends the lease only while `holder` still holds it.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# ARGV: holder. Deletes the lease only while `holder` still holds it.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisLease:
    """A lease with an expiry in Redis: at most one holder at a time, for at most `ttl_s` without renewal.

    `held()` takes the lease when it is free (``SET NX PX``) or renews it when this holder has it (a
    check-and-set script). Call it more often than `ttl_s`. When Redis cannot be reached, the holder still
    holds the lease until the expiry it last set, measured from before that call on its own clock — nobody
    else can take it sooner — and then holds nothing.
    """

    def __init__(self, client: aioredis.Redis, key: str, holder: str, ttl_s: float):
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        self.client = client
        self.key = key
        self.holder = holder
        self.ttl_ms = int(ttl_s * 1000)
        self._valid_until = 0.0  # monotonic
        self._reachable = True
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    async def held(self) -> bool:
        asked_at = time.monotonic()
        try:
            took = bool(await self.client.set(self.key, self.holder, nx=True, px=self.ttl_ms))
            took = took or bool(await self._renew(keys=[self.key], args=[self.holder, self.ttl_ms]))
        except RedisError as error:
            still = asked_at < self._valid_until
            if self._reachable:  # once per outage, not per heartbeat
                log.warning(
                    "lease %s: %s unreachable (%s); %s",
                    self.key,
                    describe(self.client),
                    error,
                    "held until its expiry" if still else "not held",
                )
            self._reachable = False
            return still
        if not self._reachable:
            log.info("lease %s: %s reachable again", self.key, describe(self.client))
        self._reachable = True
        self._valid_until = asked_at + self.ttl_ms / 1000 if took else 0.0
        return took

    async def release(self) -> None:
        """Gives the lease up (at shutdown) so another holder need not wait for its expiry; best effort."""
        self._valid_until = 0.0
        try:
            await self._release(keys=[self.key], args=[self.holder])
        except RedisError as error:
            log.warning("lease %s not released (%s); it expires on its own", self.key, error)
