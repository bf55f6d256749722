"""The Drafter's replicas one by one: a round's drafts spread over them by free capacity, and failover targets.

gRPC's round_robin (core/balancing.py) spreads *calls*; a round is one call, so one request's drafts would still
queue behind one engine. When `--drafter-address` names several replicas, the Scheduler also keeps a channel per
replica: every load sample (`--load-interval-s`) asks each one for its health and `GetLoad` (busy and queued
sequences against its capacity), and a round's N drafts are split over the ready replicas in proportion to their
free capacity (`split_drafts`), each part one StreamDrafts call with the round's numbering (`first_index`), so a
draft keeps its index, id, strategy and seed whichever replica runs it. A replica whose call fails is marked down
until its next good sample; the round re-requests its unfinished drafts on another ready replica (`rounds.failover`).

Targets: a comma list of IP:port and `ipv4:`/`ipv6:` lists name the replicas; a `dns:///name:port` target is
resolved at every sample (a headless Service's ready pods). One host:port is one replica: nothing is split.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc

from ..core.balancing import grpc_target, is_balanced
from ..core.tls import aio_channel
from .drafter_load import EngineReport

log = logging.getLogger("deliberate.replicas")

DRAFTER_SERVICE = drafter_service_pb2.DESCRIPTOR.services_by_name["DrafterService"].full_name
# How long one replica's health and load may take to answer; slower counts as down.
SAMPLE_TIMEOUT_S = 2.0


def split_drafts(num_drafts: int, free: Sequence[int]) -> list[int]:
    """How many of `num_drafts` drafts each replica gets, in proportion to its free capacity (largest remainder;
    ties to the replica with more room, then the earlier one). All full: evenly. Sums to `num_drafts`."""
    if not free:
        return []
    weights = [max(0, f) for f in free]
    if sum(weights) == 0:
        weights = [1] * len(free)
    total = sum(weights)
    quotas = [num_drafts * w / total for w in weights]
    counts = [int(q) for q in quotas]
    order = sorted(range(len(free)), key=lambda i: (-(quotas[i] - counts[i]), -weights[i], i))
    for i in order[: num_drafts - sum(counts)]:
        counts[i] += 1
    return counts


def static_replicas(address: str) -> list[str] | None:
    """The replicas a list names (host:port each); None for a dns:/// target (resolved at each sample) and for
    one host:port (no replicas of its own: the channel's one connection)."""
    if not is_balanced(address):
        return None
    target = grpc_target(address)
    if target.startswith(("ipv4:", "ipv6:")):
        return target.split(":", 1)[1].split(",")
    return None


def dns_name(address: str) -> tuple[str, int] | None:
    """(name, port) of a `dns:///name:port` (or `dns://authority/name:port`) target, else None."""
    if not address.startswith("dns:"):
        return None
    rest = address.removeprefix("dns:").lstrip("/")
    if address.startswith("dns://") and not address.startswith("dns:///"):
        rest = rest.split("/", 1)[1]  # an explicit DNS server is not used here; the system resolver is
    host, _, port = rest.rpartition(":")
    return (host, int(port)) if port.isdigit() else (rest, 443)


@dataclass
class Replica:
    address: str  # host:port as dialled, the `replica` of spans and metrics
    channel: grpc.aio.Channel
    stub: drafter_service_pb2_grpc.DrafterServiceStub
    ready: bool = False
    free: int = 0  # capacity - busy - queued at the last sample, less what was planned on it since
    capacity: int = 0
    reason: str = "not sampled yet"  # why it is not ready


@dataclass
class DrafterReplicas:
    """Channels to each replica of the Drafter and what their last samples said."""

    address: str
    credentials: grpc.ChannelCredentials | None = None
    replicas: dict[str, Replica] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Whether the address names replicas to spread over (a list or a dns:/// target)."""
        return is_balanced(self.address) and (static_replicas(self.address) is not None or bool(dns_name(self.address)))

    async def addresses(self) -> list[str]:
        listed = static_replicas(self.address)
        if listed is not None:
            return listed
        name = dns_name(self.address)
        if name is None:
            return []
        host, port = name
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found = {info[4][0] for info in infos}
        return [f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}" for ip in sorted(found)]

    def replica(self, address: str) -> Replica:
        if address not in self.replicas:
            options: tuple = ()
            name = dns_name(self.address)
            if name is not None:  # under TLS the certificate names the Service, not the pod's address
                options = (("grpc.default_authority", f"{name[0]}:{name[1]}"),)
            channel = aio_channel(address, self.credentials, options)
            self.replicas[address] = Replica(address, channel, drafter_service_pb2_grpc.DrafterServiceStub(channel))
        return self.replicas[address]

    async def refresh(self) -> list[EngineReport]:
        """Samples every replica (health and load); returns the ready ones' reports. Replicas no longer resolved
        are closed."""
        try:
            addresses = await self.addresses()
        except OSError as error:
            log.warning("drafter replicas not resolved", extra={"address": self.address, "error": str(error)})
            addresses = list(self.replicas)
        for gone in set(self.replicas) - set(addresses):
            await self.replicas.pop(gone).channel.close()
        replicas = [self.replica(address) for address in addresses]
        reports = await asyncio.gather(*(self.sample(replica) for replica in replicas))
        return [report for report in reports if report is not None]

    async def sample(self, replica: Replica) -> EngineReport | None:
        was_ready = replica.ready
        try:
            health = await health_pb2_grpc.HealthStub(replica.channel).Check(
                health_pb2.HealthCheckRequest(service=DRAFTER_SERVICE), timeout=SAMPLE_TIMEOUT_S
            )
            if health.status != health_pb2.HealthCheckResponse.SERVING:
                raise RuntimeError(health_pb2.HealthCheckResponse.ServingStatus.Name(health.status))
            load = await replica.stub.GetLoad(drafter_service_pb2.GetLoadRequest(), timeout=SAMPLE_TIMEOUT_S)
        except (grpc.aio.AioRpcError, RuntimeError) as error:
            reason = error.details() if isinstance(error, grpc.aio.AioRpcError) else str(error)
            self.mark_down(replica.address, f"sample failed: {reason}", log_it=was_ready)
            return None
        replica.ready, replica.reason = True, ""
        replica.capacity = load.capacity
        replica.free = max(0, load.capacity - load.busy_sequences - load.queued_sequences)
        if not was_ready:
            log.info("drafter replica ready", extra={"replica": replica.address, "capacity": load.capacity})
        return engine_report(load)

    def mark_down(self, address: str, reason: str, log_it: bool = True) -> None:
        """Not planned on until a sample finds it ready again."""
        replica = self.replicas.get(address)
        if replica is None:
            return
        replica.ready, replica.reason = False, reason
        if log_it:
            log.warning("drafter replica down", extra={"replica": address, "reason": reason})

    def ready(self, exclude: str = "") -> list[Replica]:
        return [r for r in self.replicas.values() if r.ready and r.address != exclude]

    def plan(self, num_drafts: int, exclude: str = "") -> list[tuple[Replica, int]]:
        """(replica, how many drafts) for a round's drafts over the ready replicas, in replica order, those with
        none left out; empty when none is ready (the caller falls back to the balanced channel). What is planned
        counts against a replica's free capacity until its next sample, so concurrent rounds spread too."""
        ready = self.ready(exclude)
        counts = split_drafts(num_drafts, [r.free for r in ready])
        for replica, count in zip(ready, counts, strict=True):
            replica.free = max(0, replica.free - count)
        return [(replica, count) for replica, count in zip(ready, counts, strict=True) if count]

    def aggregate(self, reports: list[EngineReport]) -> EngineReport:
        """The fleet as one engine: sequences and capacity summed, GPU the busiest replica's."""
        gpus = [r.gpu_utilization for r in reports if r.gpu_utilization is not None]
        memory = [r.gpu_memory_utilization for r in reports if r.gpu_memory_utilization is not None]
        return EngineReport(
            engine=",".join(sorted({r.engine for r in reports})),
            busy_sequences=sum(r.busy_sequences for r in reports),
            queued_sequences=sum(r.queued_sequences for r in reports),
            capacity=sum(r.capacity for r in reports),
            recent_tokens_per_second=sum(r.recent_tokens_per_second for r in reports),
            gpu_utilization=max(gpus) if gpus else None,
            gpu_memory_utilization=max(memory) if memory else None,
        )

    async def close(self) -> None:
        for replica in self.replicas.values():
            await replica.channel.close()
        self.replicas.clear()


def engine_report(load: drafter_service_pb2.GetLoadResponse) -> EngineReport:
    """A Drafter's `GetLoad` answer as the load monitor reads it."""
    return EngineReport(
        engine=load.engine,
        busy_sequences=load.busy_sequences,
        queued_sequences=load.queued_sequences,
        capacity=load.capacity,
        recent_tokens_per_second=load.recent_tokens_per_second,
        gpu_utilization=load.gpu_utilization if load.HasField("gpu_utilization") else None,
        gpu_memory_utilization=load.gpu_memory_utilization if load.HasField("gpu_memory_utilization") else None,
    )
