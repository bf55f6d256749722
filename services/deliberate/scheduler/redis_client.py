"""The Scheduler's Redis connection, shared by the learned-weights store (learning/weight_store.py) and the
watchdog's lease (watchdog/lease.py)."""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff


def redis_client(url: str, timeout_s: float) -> aioredis.Redis:
    """A client whose every command gives up after about `timeout_s` (connect or reply), retried once at once:
    the retry reconnects after Redis restarted; more would only make a dead Redis slower to report."""
    return aioredis.from_url(
        url,
        decode_responses=True,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1),
        health_check_interval=0,
    )


def describe(client: aioredis.Redis) -> str:
    """'Redis at host:port/db', without credentials, for messages."""
    kwargs = client.connection_pool.connection_kwargs
    where = kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
    return f"Redis at {where}/{kwargs.get('db', 0)}"
