"""Client-side load balancing to every replica of a downstream service, the gRPC way (docs/deploy.md#load-balancing).

An address setting (the Scheduler's `--drafter-address`, …) is one of:

* `host:port` — one connection, as before: gRPC's default `pick_first` to the first address the name resolves
  to, no client health checking. Behind a Kubernetes ClusterIP Service or a mesh this is the right choice: the
  Service (or Envoy) picks the replica, and one HTTP/2 connection means one replica per Scheduler without a mesh.
* a comma-separated list of replicas, `127.0.0.1:50052,127.0.0.1:50062` — IP literals only (a name may resolve
  to several addresses itself: use `dns:///name:port`); turned into gRPC's `ipv4:`/`ipv6:` target;
* a gRPC target with a scheme: `dns:///drafter-headless:50052` (every A record of a headless Service),
  `ipv4:10.0.0.1:50052,10.0.0.2:50052`, `ipv6:[::1]:50052,…`.

The last two get gRPC's `round_robin` policy (one subchannel per address, calls spread over the READY ones) and
client health checking (`healthCheckConfig`: each subchannel watches the replica's `grpc.health.v1` status, and a
replica that reports NOT_SERVING — a Drafter still loading its model, a service draining on SIGTERM — gets no
calls until it reports SERVING again).
"""

from __future__ import annotations

import ipaddress
import json

# Schemes of gRPC name resolvers whose targets are passed through as they are.
SCHEMES = ("dns:", "ipv4:", "ipv6:")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _split_host_port(item: str, address: str) -> tuple[str, str]:
    host, sep, port = item.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"{address!r}: {item!r} is not host:port")
    return host.removeprefix("[").removesuffix("]"), port


def grpc_target(address: str) -> str:
    """The gRPC target for an address setting (see the module's docstring); ValueError names what is wrong."""
    address = address.strip()
    if not address:
        raise ValueError("the address is empty")
    if address.startswith(SCHEMES):
        return address
    items = [item.strip() for item in address.split(",")]
    if len(items) == 1:
        return address
    if any(not item for item in items):
        raise ValueError(f"{address!r}: an empty entry in the list")
    hosts = [_split_host_port(item, address) for item in items]
    names = [host for host, _ in hosts if not _is_ip(host)]
    if names:
        raise ValueError(
            f"{address!r}: a list of replicas takes IP addresses only ({names[0]!r} is a name); "
            f"for a name that resolves to every replica use dns:///name:port"
        )
    versions = {ipaddress.ip_address(host).version for host, _ in hosts}
    if len(versions) > 1:
        raise ValueError(f"{address!r}: IPv4 and IPv6 addresses in one list")
    if versions == {4}:
        return "ipv4:" + ",".join(f"{host}:{port}" for host, port in hosts)
    return "ipv6:" + ",".join(f"[{host}]:{port}" for host, port in hosts)


def is_balanced(address: str) -> bool:
    """Whether the address names several replicas (or a resolver that may find several): round_robin applies."""
    return grpc_target(address) != address.strip() or address.strip().startswith(SCHEMES)


# A call that finds the channel still reconnecting to a restarted peer (UNAVAILABLE before any reply: a restarted
# Drafter or Refiner serves again within seconds, the channel's backoff lags up to 2 s, core/tls.py) is tried again
# up to 4 times inside the call's deadline. gRPC draws each wait at random below 1, 2, 2 and 2 s (gRFC A6): about
# 3.5 s of cover on average, 7 s at most, after which a peer that stays down answers UNAVAILABLE.
RETRY_POLICY = {
    "maxAttempts": 5,
    "initialBackoff": "1s",
    "maxBackoff": "2s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}


def service_config(health_service: str, balanced: bool = True, retry: bool = False) -> str:
    """gRPC's service config: round_robin over the resolved addresses, each health-checked on `health_service`
    (the full name of the gRPC service; its status is the one the server reports, see core/server.py); with
    `retry`, RETRY_POLICY for every method of that service."""
    config: dict[str, object] = {}
    if balanced:
        config["loadBalancingConfig"] = [{"round_robin": {}}]
        config["healthCheckConfig"] = {"serviceName": health_service}
    if retry:
        config["methodConfig"] = [{"name": [{"service": health_service}], "retryPolicy": RETRY_POLICY}]
    return json.dumps(config)


def channel_options(address: str, health_service: str, retry: bool = False) -> tuple[tuple[str, object], ...]:
    """The channel options that balance `address` (one host:port connects as before), and with `retry` retry a
    call that finds the peer unreachable (RETRY_POLICY).

    An `ipv4:`/`ipv6:` list has no host name, and gRPC's default authority for it is no name a certificate holds:
    under TLS the first replica's address is the name checked (a certificate with every replica's IP in its SANs,
    as deploy/dev-certs.sh writes for 127.0.0.1 and ::1, passes). A `dns:///name:port` target checks `name`."""
    balanced = is_balanced(address)
    if not balanced and not retry:
        return ()
    options: list[tuple[str, object]] = [("grpc.service_config", service_config(health_service, balanced, retry))]
    if not balanced:
        return tuple(options)
    target = grpc_target(address)
    if target.startswith(("ipv4:", "ipv6:")):
        options.append(("grpc.default_authority", target.split(":", 1)[1].split(",")[0]))
    return tuple(options)
