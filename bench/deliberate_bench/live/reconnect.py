"""How long after a peer serves again a channel's next call succeeds: capped reconnect backoff vs gRPC's default.

    deliberate bench reconnect [--outage 17] [--trials 3]

Each trial calls a health check every 0.3 s on a port where nothing listens for `--outage` seconds, then starts a
server there and measures the time to the first successful call, for a channel made by `deliberate.core.tls.
aio_channel` (reconnect backoff capped at 2 s) and a plain `grpc.aio` channel side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import time

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from deliberate.core.tls import aio_channel

PROBE_EVERY_S = 0.3


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


async def seconds_to_first_success(channel: grpc.aio.Channel, address: str, outage_s: float) -> float:
    stub = health_pb2_grpc.HealthStub(channel)
    begun = time.monotonic()
    server, serving_since = None, 0.0
    try:
        while True:
            if server is None and time.monotonic() - begun > outage_s:
                server = grpc.aio.server()
                health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
                server.add_insecure_port(address)
                await server.start()
                serving_since = time.monotonic()
            try:
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=PROBE_EVERY_S)
                if server is not None:
                    return time.monotonic() - serving_since
            except grpc.RpcError:
                pass
            await asyncio.sleep(PROBE_EVERY_S)
    finally:
        await channel.close()
        if server is not None:
            await server.stop(None)


async def trial(outage_s: float) -> tuple[float, float]:
    capped, default = free_address(), free_address()
    return await asyncio.gather(
        seconds_to_first_success(aio_channel(capped, None), capped, outage_s),
        seconds_to_first_success(grpc.aio.insecure_channel(default), default, outage_s),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outage", type=float, default=17.0, help="seconds with nothing listening")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args(argv)
    for n in range(args.trials):
        capped, default = asyncio.run(trial(args.outage))
        print(f"trial {n + 1}: first success {capped:.2f} s (capped backoff) vs {default:.2f} s (gRPC default)")


if __name__ == "__main__":
    main()
