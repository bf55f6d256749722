"""TLS for the gRPC servers and the channels between services, from PEM files named by settings.

Plain text stays the default (local development, and the Istio overlay where the mesh encrypts). A server with
a certificate serves TLS only; with a client CA too it also demands a client certificate that CA signed (mTLS).
A channel with a CA file verifies the server against it, and presents a client certificate when given one.
See docs/security.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import grpc


def read_pem(path: str, setting: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise SystemExit(f"--{setting.replace('_', '-')}: cannot read {path!r}: {error.strerror}") from None


def server_credentials(cert_file: str, key_file: str, client_ca_file: str) -> grpc.ServerCredentials | None:
    """None for plain text (no certificate); mTLS when a client CA is given."""
    if not cert_file and not key_file:
        if client_ca_file:
            raise SystemExit("--tls-client-ca-file needs --tls-cert-file and --tls-key-file (the server's own)")
        return None
    if not (cert_file and key_file):
        raise SystemExit("--tls-cert-file and --tls-key-file go together")
    return grpc.ssl_server_credentials(
        [(read_pem(key_file, "tls_key_file"), read_pem(cert_file, "tls_cert_file"))],
        root_certificates=read_pem(client_ca_file, "tls_client_ca_file") if client_ca_file else None,
        require_client_auth=bool(client_ca_file),
    )


def channel_credentials(
    ca_file: str, cert_file: str, key_file: str, prefix: str = "downstream_tls"
) -> grpc.ChannelCredentials | None:
    """None for plain text (no file given). `prefix` names the settings in error messages."""
    if not (ca_file or cert_file or key_file):
        return None
    if bool(cert_file) != bool(key_file):
        raise SystemExit(f"--{prefix}-cert-file and --{prefix}-key-file go together".replace("_", "-"))
    return grpc.ssl_channel_credentials(
        root_certificates=read_pem(ca_file, f"{prefix}_ca_file") if ca_file else None,  # None: the system's CAs
        private_key=read_pem(key_file, f"{prefix}_key_file") if key_file else None,
        certificate_chain=read_pem(cert_file, f"{prefix}_cert_file") if cert_file else None,
    )


# Channels between deliberate's own processes: a restarted peer serves again within seconds, while gRPC's default
# reconnect backoff grows to 120 s, during which every call fails at once with UNAVAILABLE. 2 s bounds that lag.
RECONNECT_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
)


def aio_channel(
    address: str, credentials: grpc.ChannelCredentials | None, options: Sequence[tuple[str, object]] = ()
) -> grpc.aio.Channel:
    """A channel from one deliberate service to another (reconnects within 2 s of the peer's return)."""
    options = (*RECONNECT_OPTIONS, *options)
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, credentials, options=options)


def sync_channel(
    address: str, credentials: grpc.ChannelCredentials | None, options: Sequence[tuple[str, object]] = ()
) -> grpc.Channel:
    if credentials is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, credentials, options=options)
