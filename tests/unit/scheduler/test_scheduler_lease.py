"""The watchdog's lease (scheduler/watchdog/lease.py) in a real redis-server: one holder at a time, through an
outage."""

from __future__ import annotations

import asyncio

from deliberate.scheduler.redis_client import redis_client
from deliberate.scheduler.watchdog.lease import RedisLease


def test_a_lease_has_one_holder_until_it_expires_or_is_released(redis_server):
    async def scenario():
        client = redis_client(redis_server.url, 0.5)
        a = RedisLease(client, "test:lease", "a", ttl_s=0.5)
        b = RedisLease(client, "test:lease", "b", ttl_s=0.5)
        seen = {"a takes": await a.held(), "b waits": await b.held(), "a renews": await a.held()}
        await asyncio.sleep(0.3)
        seen["a renews again"] = await a.held()
        await asyncio.sleep(0.3)  # 0.6 s after a took it, 0.3 s after the renewal
        seen["b still waits"] = await b.held()
        await asyncio.sleep(0.6)  # a stopped renewing: its lease expired
        seen["b takes"] = await b.held()
        seen["a lost"] = await a.held()
        await b.release()
        seen["a takes after release"] = await a.held()
        seen["holder"] = await client.get("test:lease")
        await client.aclose()
        return seen

    seen = asyncio.run(scenario())
    assert seen == {
        "a takes": True,
        "b waits": False,
        "a renews": True,
        "a renews again": True,
        "b still waits": False,
        "b takes": True,
        "a lost": False,
        "a takes after release": True,
        "holder": "a",
    }


def test_a_lease_holder_keeps_it_through_an_outage_only_until_its_expiry(redis_server):
    async def scenario():
        client = redis_client(redis_server.url, 0.3)
        lease = RedisLease(client, "test:lease", "a", ttl_s=1.5)
        took = await lease.held()
        redis_server.stop()
        during = await lease.held()
        await asyncio.sleep(1.6)
        after_expiry = await lease.held()
        await client.aclose()
        return took, during, after_expiry

    assert asyncio.run(scenario()) == (True, True, False)
