"""`python -m deliberate.core.healthcheck [HOST:PORT]`: exit 0 when the service's gRPC health says SERVING.

Without an address it checks 127.0.0.1 at the service's own `DELIBERATE_PORT`, so one HEALTHCHECK line
serves every image and follows a changed port.

Container HEALTHCHECKs use it, so an image needs no grpc_health_probe binary; Kubernetes uses its native
gRPC probes instead (plain text only). `--tls-*` checks a TLS or mTLS server.
`--http /health` asks an HTTP server instead (the gateway): serving means a 200.
Exit codes: 0 serving, 1 anything else (not serving, unreachable, timed out).
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .tls import channel_credentials, sync_channel


def check(
    address: str, service: str = "", timeout_s: float = 3.0, credentials: grpc.ChannelCredentials | None = None
) -> str:
    """The serving status name (`SERVING`, `NOT_SERVING`, ...) or the gRPC error that prevented an answer."""
    with sync_channel(address, credentials) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as error:
            return f"{error.code().name}: {error.details()}"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def check_http(url: str, timeout_s: float = 3.0) -> str:
    """`SERVING` for a 200, else the status or the error that prevented an answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return "SERVING" if reply.status == 200 else f"HTTP {reply.status}"
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}"
    except OSError as error:
        return f"unreachable: {error}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deliberate.core.healthcheck", description=__doc__)
    parser.add_argument(
        "address", nargs="?", default=None, help="host:port of the gRPC server (default 127.0.0.1:$DELIBERATE_PORT)"
    )
    parser.add_argument("--service", default="", help="health service name; empty = the whole server")
    parser.add_argument("--timeout-s", type=float, default=3.0)
    parser.add_argument("--http", metavar="PATH", help="GET http://ADDRESS/PATH instead of gRPC health, e.g. /health")
    parser.add_argument("--tls-ca-file", default="", help="TLS: PEM CA bundle that verifies the server")
    parser.add_argument("--tls-cert-file", default="", help="mTLS: PEM client certificate (a service's own will do)")
    parser.add_argument("--tls-key-file", default="", help="mTLS: its PEM private key")
    args = parser.parse_args(argv)
    address = args.address or f"127.0.0.1:{os.environ.get('DELIBERATE_PORT', '')}"
    if args.http:
        status = check_http(f"http://{address}{args.http}", args.timeout_s)
    else:
        credentials = channel_credentials(args.tls_ca_file, args.tls_cert_file, args.tls_key_file, prefix="tls")
        status = check(address, args.service, args.timeout_s, credentials)
    print(f"{address}: {status}")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main())
