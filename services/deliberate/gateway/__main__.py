"""`python -m deliberate.gateway`: OpenAI-compatible HTTP in front of the Scheduler (docs/gateway.md)."""

from __future__ import annotations

import signal
import ssl
import sys

import uvicorn

from ..core.config import parse_settings
from ..core.logs import setup_logging
from ..core.telemetry import setup_tracing
from .server import create_app
from .settings import GatewaySettings


def https_options(settings: GatewaySettings) -> dict:
    """HTTPS from the same --tls-* settings as the gRPC services; a client CA makes client certificates
    mandatory. None given: plain HTTP."""
    if not (settings.tls_cert_file or settings.tls_key_file or settings.tls_client_ca_file):
        return {}
    if not (settings.tls_cert_file and settings.tls_key_file):
        raise SystemExit("--tls-cert-file and --tls-key-file go together (--tls-client-ca-file needs both)")
    options = {"ssl_certfile": settings.tls_cert_file, "ssl_keyfile": settings.tls_key_file}
    if settings.tls_client_ca_file:
        options |= {"ssl_ca_certs": settings.tls_client_ca_file, "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(GatewaySettings, argv, prog="deliberate.gateway")
    setup_logging("gateway", settings.log_level)
    # The gRPC client spans join the caller's trace.
    provider = setup_tracing("gateway", settings.trace_exporter, settings.trace_file)
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_config=None,  # uvicorn's records go through the JSON logs
        access_log=False,
        timeout_graceful_shutdown=int(settings.shutdown_grace_s),
        **https_options(settings),
    )
    # uvicorn drains on SIGTERM and then raises it again under the handler it found; the default one would end
    # the process before `finally` flushes the last spans, so that handler exits through SystemExit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        uvicorn.Server(config).run()
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main()
