"""The Scheduler's shared state in a real redis-server: several store instances play several replicas."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

import pytest

from deliberate.scheduler.learning import weight_store as state_module
from deliberate.scheduler.learning import weights as weights_module
from deliberate.scheduler.learning.weight_learner import WeightLearner
from deliberate.scheduler.learning.weight_store import RedisStateStore, StateUnavailable
from deliberate.scheduler.learning.weights import DecisionFeatures, Weights
from deliberate.scheduler.redis_client import redis_client

DEFAULT_LEARNED = {"score": 1.0, "agreement": 0.3, "answer_share": 0.3}


def replicas(url: str, count: int = 2, **options) -> list[RedisStateStore]:
    return [RedisStateStore.from_url(url, timeout_s=0.5, **options) for _ in range(count)]


async def close(*stores: RedisStateStore) -> None:
    for store in stores:
        await store.close()


def synthetic(rng: random.Random, count: int) -> list[tuple[str, DecisionFeatures, bool]]:
    """Decisions whose acceptance follows agreement (with 10% noise), so a refit has a signal to learn."""
    rows = []
    for i in range(count):
        features = DecisionFeatures(rng.uniform(0, 1), rng.uniform(0.5, 1), 0.1, rng.uniform(0, 1))
        accepted = (features.agreement > 0.75) != (rng.random() < 0.1)
        rows.append((f"req-{i}-{rng.getrandbits(32):08x}", features, accepted))
    return rows


def test_feedback_is_accepted_by_any_replica_once(redis_server):
    async def scenario():
        a, b = replicas(redis_server.url)
        await a.record("r1", DecisionFeatures(0.9, 1.0, 0.1, 0.5))
        first = await b.submit("r1", True)
        again = await a.submit("r1", False)
        unknown = await b.submit("never-recorded", True)
        state = await a.snapshot()
        await close(a, b)
        return first, again, unknown, state

    first, again, unknown, state = asyncio.run(scenario())
    assert first.found and first.outcomes_until_refit == 99
    assert not again.found and not unknown.found
    counters = state["counters"]
    assert (counters["submitted"], counters["accepted"], counters["rejected"], counters["unknown_request"]) == (
        3,
        1,
        0,
        2,
    )
    assert state["pending"] == 0


def test_one_refit_per_100_outcomes_across_replicas_matches_the_local_learner(redis_server):
    decisions = synthetic(random.Random(3), 150)
    local = WeightLearner()
    for request_id, features, accepted in decisions:
        local.record(request_id, features)
        local.submit(request_id, accepted)

    async def scenario():
        a, b = replicas(redis_server.url)
        for i, (request_id, features, accepted) in enumerate(decisions):
            await (a, b)[i % 2].record(request_id, features)
            await (b, a)[i % 2].submit(request_id, accepted)
        states = [await a.snapshot(), await b.snapshot()]
        weights = [a.weights_for_load(0.0), b.weights_for_load(0.0)]
        await close(a, b)
        return states, weights

    states, weights = asyncio.run(scenario())
    assert states[0] == states[1]
    assert states[0]["counters"]["refits"] == 1
    assert states[0]["outcomes_until_refit"] == 50
    assert states[0]["weights"] == local.snapshot()["weights"] != DEFAULT_LEARNED
    assert weights[0] == weights[1] == local.weights_for_load(0.0)


def test_concurrent_feedback_from_four_replicas_refits_exactly_once_per_window(redis_server):
    decisions = synthetic(random.Random(5), 250)

    async def scenario():
        stores = replicas(redis_server.url, 4)
        await asyncio.gather(*(stores[i % 4].record(r, f) for i, (r, f, _) in enumerate(decisions)))
        results = await asyncio.gather(*(stores[(i + 1) % 4].submit(r, ok) for i, (r, _, ok) in enumerate(decisions)))
        state = await stores[0].snapshot()
        await close(*stores)
        return results, state

    results, state = asyncio.run(scenario())
    assert all(result.found for result in results)
    counters = state["counters"]
    assert counters["refits"] + counters["refits_skipped"] == 2
    assert counters["accepted"] + counters["rejected"] == 250
    assert state["outcomes_until_refit"] == 50
    assert state["pending"] == 0


def test_a_refit_left_half_done_is_finished_by_the_next_replica_to_start(redis_server):
    decisions = synthetic(random.Random(7), 100)

    async def scenario():
        (crashing,) = replicas(redis_server.url, 1)

        async def dies_before_applying() -> None:  # the replica is killed between claiming and applying
            return None

        crashing._finish_refits = dies_before_applying
        for request_id, features, accepted in decisions:
            await crashing.record(request_id, features)
            await crashing.submit(request_id, accepted)
        before = await crashing.snapshot()
        await crashing.close()
        (restarted,) = replicas(redis_server.url, 1)
        await restarted.start()
        after = await restarted.snapshot()
        await restarted.close()
        return before, after

    before, after = asyncio.run(scenario())
    assert before["counters"]["refits"] == 0 and before["weights"] == DEFAULT_LEARNED
    assert after["counters"]["refits"] == 1
    assert after["weights"] != before["weights"]


def test_a_weights_hash_in_the_old_layout_is_read_and_kept_in_it(redis_server):
    """A hash a Scheduler before the named vector wrote (alpha, beta, delta, generation) reads as it is, and a
    new replica's refit writes the same fields and advances the same generation: old replicas of a rolling
    upgrade read what new ones learned, and the generation check still lets one application win."""
    decisions = synthetic(random.Random(31), 100)
    key = state_module.DEFAULT_PREFIX + "weights"

    async def scenario():
        client = redis_client(redis_server.url, 0.5)
        await client.hset(key, mapping={"alpha": "0.8", "beta": "0.5", "delta": "0.3", "generation": "4"})
        (store,) = replicas(redis_server.url, 1)
        await store.start()
        read = store.weights_for_load(0.0), await store.snapshot()
        for request_id, features, accepted in decisions:
            await store.record(request_id, features)
            await store.submit(request_id, accepted)
        after = await store.snapshot(), await client.hgetall(key)
        # An old replica applies the next refit (its script: HSET alpha/beta/delta, HINCRBY generation).
        await client.hset(key, mapping={"alpha": "0.9", "beta": "0.4", "delta": "0.3"})
        await client.hincrby(key, "generation", 1)
        seen = await store.snapshot()
        await close(store)
        await client.aclose()
        return read, after, seen

    (weights, before), (after, stored), seen = asyncio.run(scenario())
    assert (weights.alpha, weights.beta, weights.delta) == (0.8, 0.5, 0.3)
    assert before["weights"] == {"score": 0.8, "agreement": 0.5, "answer_share": 0.3}
    assert after["counters"]["refits"] == 1 and after["weights"] != before["weights"]
    assert set(stored) == {"alpha", "beta", "delta", "generation"}  # no second set of fields
    assert stored["generation"] == "5"
    assert {name: float(stored[field]) for name, field in state_module.weight_fields().items()} == after["weights"]
    assert seen["weights"] == {"score": 0.9, "agreement": 0.4, "answer_share": 0.3}


def test_the_scripts_name_no_weight():
    """The learned weights' names reach the Lua scripts only as arguments."""
    scripts = (state_module._RECORD, state_module._SUBMIT, state_module._APPLY_REFIT, state_module._SNAPSHOT)
    names = {*weights_module.LEARNED, *weights_module.SEED_NAMES.values()}
    assert not [(name, script) for script in scripts for name in names if f"'{name}'" in script]


def test_a_learned_signal_added_to_the_declaration_is_kept_in_redis(redis_server, monkeypatch):
    """One more entry in `LEARNED` and every replica keeps, reads and reports a fourth weight. The decisions
    do not record it, so the fit leaves it alone (not recorded: keeps its weight) and moves the other three."""
    monkeypatch.setitem(weights_module.LEARNED, "evidence", 0.2)
    decisions = synthetic(random.Random(37), 100)
    key = state_module.DEFAULT_PREFIX + "weights"

    async def scenario():
        client = redis_client(redis_server.url, 0.5)
        a, b = replicas(redis_server.url)
        await a.start()
        fresh = await a.snapshot()
        for i, (request_id, features, accepted) in enumerate(decisions):
            await (a, b)[i % 2].record(request_id, features)
            await (b, a)[i % 2].submit(request_id, accepted)
        refitted = await a.snapshot(), await client.hgetall(key)
        await client.hset(key, "evidence", "0.7")  # another replica's value
        await b.record("one-more", DecisionFeatures(0.5, 1.0, 0.0, 0.5))
        seen = b.weights_for_load(0.0), await a.snapshot()
        await close(a, b)
        await client.aclose()
        return fresh, refitted, seen

    fresh, (refitted, stored), (weights, snapshot) = asyncio.run(scenario())
    assert fresh["weights"] == {**DEFAULT_LEARNED, "evidence": 0.2}
    assert refitted["counters"]["refits"] == 1
    assert refitted["weights"]["evidence"] == 0.2  # not recorded by the decisions: kept
    assert sum(refitted["weights"][name] for name in DEFAULT_LEARNED) == pytest.approx(1.6)
    assert refitted["weights"] != {**DEFAULT_LEARNED, "evidence": 0.2}
    assert set(stored) == {"alpha", "beta", "delta", "evidence", "generation"}
    assert float(stored["evidence"]) == 0.2
    assert weights.by_signal["evidence"] == 0.7 and weights.vector()["evidence"] == 0.7  # the policy weighs it
    assert snapshot["weights"]["evidence"] == 0.7


def test_pending_decisions_expire_and_are_bounded(redis_server):
    async def scenario():
        (store,) = replicas(redis_server.url, 1, pending_ttl_s=0.3, max_pending=3)
        await store.record("old", DecisionFeatures(0.5, 1.0, 0.0))
        await asyncio.sleep(0.4)
        expired = await store.submit("old", True)
        for i in range(5):
            await store.record(f"r{i}", DecisionFeatures(0.5, 1.0, 0.0))
        evicted = await store.submit("r0", True)
        kept = await store.submit("r4", True)
        state = await store.snapshot()
        await store.close()
        return expired, evicted, kept, state

    expired, evicted, kept, state = asyncio.run(scenario())
    assert not expired.found and not evicted.found and kept.found
    assert state["counters"]["expired"] == 1
    assert state["counters"]["evicted"] == 2
    assert state["pending"] == 2  # r2, r3


def test_redis_down_refuses_feedback_quickly_keeps_weights_and_loses_nothing(redis_server):
    decisions = synthetic(random.Random(11), 101)

    async def before_the_outage():
        (store,) = replicas(redis_server.url, 1)
        for request_id, features, accepted in decisions[:100]:
            await store.record(request_id, features)
            await store.submit(request_id, accepted)
        await store.record(*decisions[100][:2])  # awaits its feedback across the outage
        return store, await store.snapshot()

    async def during_the_outage(store: RedisStateStore):
        started = time.monotonic()
        with pytest.raises(StateUnavailable) as refused:
            await store.submit(decisions[100][0], True)
        await store.record("lost-during-outage", DecisionFeatures(0.5, 1.0, 0.0))  # logged, not raised
        return refused.value, time.monotonic() - started, store.weights_for_load(0.0), await store.snapshot()

    async def after_the_outage(store: RedisStateStore):
        result = await store.submit(decisions[100][0], True)
        state = await store.snapshot()
        await store.close()
        return result, state

    loop = asyncio.new_event_loop()
    try:
        store, before = loop.run_until_complete(before_the_outage())
        redis_server.stop()
        refused, took_s, weights, reported = loop.run_until_complete(during_the_outage(store))
        redis_server.start()  # same port, same data directory
        result, after = loop.run_until_complete(after_the_outage(store))
    finally:
        loop.close()

    assert f"Redis at 127.0.0.1:{redis_server.port}/0 is unavailable" in str(refused)
    assert took_s < 3.0
    assert store.record_failures == 1
    assert before["counters"]["refits"] == 1
    assert weights.learned == tuple(before["weights"].values()) != Weights().learned
    assert reported == before  # GetState answers with the state last read
    assert result.found  # the decision recorded before the outage survived Redis's restart
    assert after["counters"]["submitted"] == before["counters"]["submitted"] + 1
    assert after["weights"] == before["weights"]


def test_a_hung_redis_fails_calls_within_the_timeout_instead_of_hanging_them(redis_server):
    async def scenario():
        (store,) = replicas(redis_server.url, 1)  # 0.5 s timeout, one retry
        await store.record("before", DecisionFeatures(0.5, 1.0, 0.0))
        os.kill(redis_server.process.pid, signal.SIGSTOP)  # a real hang: connected, never answering
        try:
            started = time.monotonic()
            with pytest.raises(StateUnavailable, match="TimeoutError"):
                await store.submit("before", True)
            submit_s = time.monotonic() - started
            started = time.monotonic()
            await store.record("during", DecisionFeatures(0.5, 1.0, 0.0))
            record_s = time.monotonic() - started
        finally:
            os.kill(redis_server.process.pid, signal.SIGCONT)
        # Whether the timed-out submit ran once Redis resumed is unknowable to the caller (it was told UNAVAILABLE;
        # a retry then gets NOT_FOUND). What matters: the same client works again without a restart.
        await store.record("after", DecisionFeatures(0.5, 1.0, 0.0))
        after = await store.submit("after", True)
        await store.close()
        return submit_s, record_s, after

    submit_s, record_s, after = asyncio.run(scenario())
    assert submit_s < 2.0 and record_s < 2.0
    assert after.found
