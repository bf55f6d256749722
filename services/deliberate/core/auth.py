"""Bearer tokens for a gRPC server: `authorization: Bearer <token>` metadata, checked by a server interceptor.

A token file holds one token per line, optionally followed by the permissions it grants (comma-separated);
a token without any grants them all. A call without a known token gets UNAUTHENTICATED, a known token without
the method's permission PERMISSION_DENIED. Health and reflection stay open, so probes need no token.
Tokens are compared as SHA-256 digests in constant time and never logged. See docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

OPEN_SERVICES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Tokens:
    """The accepted tokens' digests and what each may do."""

    permissions_of: Mapping[bytes, frozenset[str]]
    known_permissions: frozenset[str]

    @classmethod
    def load(cls, path: str, known_permissions: frozenset[str]) -> Tokens:
        """Errors name the line, never the token."""
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as error:
            raise SystemExit(f"--auth-tokens-file: cannot read {path!r}: {error.strerror}") from None
        permissions_of = {}
        for number, line in enumerate(lines, 1):
            fields = line.split(maxsplit=1)  # the token, then its permissions after any blanks
            if not fields or fields[0].startswith("#"):
                continue
            token, grants = fields[0], fields[1] if len(fields) > 1 else ""
            granted = frozenset(p.strip() for p in grants.split(",") if p.strip()) or known_permissions
            if unknown := granted - known_permissions:
                raise SystemExit(
                    f"--auth-tokens-file {path}:{number}: unknown permission {', '.join(sorted(unknown))} "
                    f"(known: {', '.join(sorted(known_permissions))})"
                )
            permissions_of[digest(token)] = granted
        if not permissions_of:
            raise SystemExit(f"--auth-tokens-file {path}: no token in it")
        return cls(permissions_of, known_permissions)

    def permissions(self, token: str) -> frozenset[str] | None:
        """The token's permissions, None for an unknown token. Every digest is compared, so the time taken
        does not tell how close a guess came."""
        given = digest(token)
        found = None
        for known, granted in self.permissions_of.items():
            if hmac.compare_digest(given, known):
                found = granted
        return found


def bearer_token(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuses a call before its handler runs. `permission_of` maps a method's full name
    (`/pkg.Service/Method`) to the permission it needs; a method it does not know needs every permission."""

    def __init__(self, tokens: Tokens, permission_of: Callable[[str], str | None]):
        self.tokens = tokens
        self.permission_of = permission_of

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        handler = await continuation(handler_call_details)
        if handler is None or method.startswith(OPEN_SERVICES):
            return handler
        token = bearer_token(handler_call_details.invocation_metadata)
        granted = self.tokens.permissions(token) if token else None
        if granted is None:
            return refusal(handler, grpc.StatusCode.UNAUTHENTICATED, "missing or unknown bearer token "
                           "(metadata `authorization: Bearer <token>`)")  # fmt: skip
        permission = self.permission_of(method)
        needed = {permission} if permission else self.tokens.known_permissions
        if not granted >= needed:
            return refusal(handler, grpc.StatusCode.PERMISSION_DENIED,
                           f"this token may not call {method} (needs {', '.join(sorted(needed))})")  # fmt: skip
        return handler


def refusal(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same kind as `handler` (unary or streaming) that only aborts."""

    async def abort(request_or_iterator, context: grpc.aio.ServicerContext):
        await context.abort(code, message)

    async def abort_stream(request_or_iterator, context: grpc.aio.ServicerContext):
        await context.abort(code, message)
        yield  # makes it an async generator, as a streaming handler is

    codecs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(abort, **codecs)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(abort_stream, **codecs)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(abort, **codecs)
    return grpc.stream_stream_rpc_method_handler(abort_stream, **codecs)


def method_permissions(service: str, permission_of_method: Mapping[str, str]) -> Callable[[str], str | None]:
    """`permission_of` for one service's methods, given by their short names."""
    prefix = f"/{service}/"
    return lambda method: permission_of_method.get(method.removeprefix(prefix)) if method.startswith(prefix) else None
