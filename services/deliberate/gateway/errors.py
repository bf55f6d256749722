"""OpenAI's error format, and the translation of the Scheduler's gRPC statuses into it.

A body `{"error": {"message", "type", "param", "code"}}` with the HTTP status OpenAI's SDKs map to their
exception classes (400 BadRequestError, 401 AuthenticationError, 429 RateLimitError, …).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import grpc

# gRPC status → (HTTP status, OpenAI error type).
HTTP_OF_STATUS: dict[grpc.StatusCode, tuple[int, str]] = {
    grpc.StatusCode.INVALID_ARGUMENT: (400, "invalid_request_error"),
    grpc.StatusCode.OUT_OF_RANGE: (400, "invalid_request_error"),
    grpc.StatusCode.FAILED_PRECONDITION: (400, "invalid_request_error"),
    grpc.StatusCode.UNAUTHENTICATED: (401, "authentication_error"),
    grpc.StatusCode.PERMISSION_DENIED: (403, "permission_error"),
    grpc.StatusCode.NOT_FOUND: (404, "not_found_error"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (429, "rate_limit_error"),
    grpc.StatusCode.CANCELLED: (499, "cancelled"),
    grpc.StatusCode.UNAVAILABLE: (503, "service_unavailable"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (504, "timeout"),
}


@dataclass
class ApiError(Exception):
    """An error answered to the HTTP client. `param` names the request body's field (OpenAI's convention)."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    retry_after_ms: int | None = None  # a busy service's hint, sent as Retry-After

    def headers(self) -> dict[str, str]:
        """A retry hint as Retry-After in whole seconds (RFC 9110) and, exact, as OpenAI's retry-after-ms."""
        if self.retry_after_ms is None:
            return {}
        return {"Retry-After": str(math.ceil(self.retry_after_ms / 1000)), "retry-after-ms": str(self.retry_after_ms)}

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def invalid(field: str, problem: str) -> ApiError:
    """400 naming the request body's field, worded like the services' INVALID_ARGUMENT: `field: problem`."""
    return ApiError(400, f"{field}: {problem}", param=field, code="invalid_argument")


def from_grpc(
    code: grpc.StatusCode,
    details: str,
    rename: Callable[[str], str] = lambda path: path,
    retry_after_ms: int | None = None,
) -> ApiError:
    """The HTTP error for a Scheduler status. An INVALID_ARGUMENT message begins with the SolveRequest field's
    path (`sampling.temperature: must be in [0, 2], got 3`); `rename` turns that path into the body's field
    (`temperature`), which becomes `param` and the message's first word. A RESOURCE_EXHAUSTED's retry hint
    (`retry_after_ms`) becomes the 429's Retry-After."""
    status, kind = HTTP_OF_STATUS.get(code, (500, "server_error"))
    param = None
    if code == grpc.StatusCode.INVALID_ARGUMENT and ": " in details:
        path, problem = details.split(": ", 1)
        if path and " " not in path:
            param = rename(path)
            details = f"{param}: {problem}"
    return ApiError(status, details, type=kind, param=param, code=code.name.lower(), retry_after_ms=retry_after_ms)
