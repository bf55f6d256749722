"""A round's drafts over the Drafter's replicas (scheduler/replicas.py, drafter_calls.DrafterCalls.part): the split by
free capacity, the replicas an address names, and the parts numbered and seeded as one call would be. Through real
processes (spreading, failover): tests/integration/test_drafter_replicas.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deliberate.scheduler.replicas import DrafterReplicas, dns_name, split_drafts, static_replicas
from deliberate.scheduler.rounds.drafter_calls import DrafterCalls
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2


@pytest.mark.parametrize(
    ("num_drafts", "free", "counts"),
    [
        (4, [8, 8], [2, 2]),
        (5, [8, 8], [3, 2]),  # the remainder to the earlier of equals
        (4, [6, 2], [3, 1]),
        (4, [0, 8], [0, 4]),  # a full replica gets none while another has room
        (4, [0, 0], [2, 2]),  # all full: evenly
        (1, [1, 7], [0, 1]),
        (3, [8], [3]),
        (0, [8, 8], [0, 0]),
    ],
)
def test_drafts_split_by_free_capacity(num_drafts, free, counts):
    assert split_drafts(num_drafts, free) == counts
    assert sum(counts) == num_drafts


def test_the_replicas_an_address_names():
    assert static_replicas("127.0.0.1:1,127.0.0.1:2") == ["127.0.0.1:1", "127.0.0.1:2"]
    assert static_replicas("ipv6:[::1]:1,[::1]:2") == ["[::1]:1", "[::1]:2"]
    assert static_replicas("127.0.0.1:1") is None  # one Drafter: nothing to spread over
    assert static_replicas("dns:///drafter-headless:50052") is None  # resolved at each sample
    assert dns_name("dns:///drafter-headless:50052") == ("drafter-headless", 50052)
    assert dns_name("127.0.0.1:1,127.0.0.1:2") is None
    assert DrafterReplicas("dns:///drafter-headless:50052").active
    assert not DrafterReplicas("drafter:50052").active


def ready(replicas: DrafterReplicas, free: dict[str, int]) -> None:
    for address, room in free.items():
        replica = SimpleNamespace(address=address, ready=True, free=room, capacity=8, reason="", stub=None)
        replicas.replicas[address] = replica


def test_planned_drafts_count_against_a_replicas_room_until_its_next_sample():
    replicas = DrafterReplicas("127.0.0.1:1,127.0.0.1:2")
    ready(replicas, {"127.0.0.1:1": 4, "127.0.0.1:2": 4})
    first = [(r.address, n) for r, n in replicas.plan(4)]
    assert first == [("127.0.0.1:1", 2), ("127.0.0.1:2", 2)]
    assert [r.free for r in replicas.replicas.values()] == [2, 2]
    replicas.mark_down("127.0.0.1:2", "UNAVAILABLE", log_it=False)
    assert [(r.address, n) for r, n in replicas.plan(3)] == [("127.0.0.1:1", 3)]  # the ready one only
    assert replicas.plan(1, exclude="127.0.0.1:1") == []  # nowhere else to go


def calls_of(request: drafter_service_pb2.GenerateDraftsRequest) -> DrafterCalls:
    stubs = SimpleNamespace(drafter_replicas=DrafterReplicas("127.0.0.1:1,127.0.0.1:2"))
    deadline = SimpleNamespace(left=lambda: 100.0)
    return DrafterCalls(SimpleNamespace(stubs=stubs), deadline, request)


def test_a_part_of_the_round_keeps_each_drafts_index_seed_and_kind():
    request = drafter_service_pb2.GenerateDraftsRequest(
        prompt="q", num_drafts=5, program_drafts=2, strategies=["a", "b"], round=1, feedback="f",
        sampling=common_pb2.SamplingParams(seed=100),
    )  # fmt: skip
    calls = calls_of(request)
    first, second = calls.part(request, 0, 2), calls.part(request, 2, 3)
    assert (first.first_index, first.num_drafts, first.program_drafts, first.sampling.seed) == (0, 2, 0, 100)
    # Drafts 2, 3, 4 of the round: seeds 102.. as in one call (the engine seeds the i-th draft of a call seed + i),
    # the round's last two programs among them, the same hints, round and feedback.
    assert (second.first_index, second.num_drafts, second.program_drafts, second.sampling.seed) == (2, 3, 2, 102)
    assert list(second.strategies) == ["a", "b"] and second.round == 1 and second.feedback == "f"
    moved = calls.part(second, 1, 1)  # draft 3, moved alone to another replica
    assert (moved.first_index, moved.num_drafts, moved.program_drafts, moved.sampling.seed) == (3, 1, 1, 103)


def test_an_unseeded_part_stays_unseeded():
    request = drafter_service_pb2.GenerateDraftsRequest(prompt="q", num_drafts=4)
    assert not calls_of(request).part(request, 2, 2).sampling.HasField("seed")
