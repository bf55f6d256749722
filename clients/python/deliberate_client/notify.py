"""`deliberate solve … --notify URL`: the final answer POSTed as JSON to a webhook.

It runs in the client, on the caller's network: the webhook is the caller's, so the services need no outbound
access (and no Scheduler can be made to call an arbitrary URL). Standard library only: the client stays light.

Delivery is at least once, made safe to repeat by an `Idempotency-Key` header that is the request id, the same
on every attempt: a receiver that stores the keys it has seen turns retries into exactly once. Connection
errors, timeouts, 408, 429 and 5xx are retried with exponential backoff (a 429's or 503's `Retry-After`, in
seconds, is honoured up to `MAX_RETRY_AFTER_S`); any other status is final, a redirect included (following
one would turn the POST into a GET).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from urllib.parse import urlsplit

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

USER_AGENT = "deliberate-client/0.1.0"
RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 8.0
MAX_RETRY_AFTER_S = 30.0
MAX_QUOTED_BODY = 200  # of a refusing receiver's reply, in the error


@dataclass(frozen=True)
class Policy:
    attempts: int = 4
    timeout_s: float = 10.0  # per attempt: connect, send and read the reply
    backoff_s: float = 0.5  # before the second attempt; doubled each time up to MAX_BACKOFF_S


@dataclass(frozen=True)
class Delivery:
    delivered: bool
    attempts: int
    detail: str  # "HTTP 200" or why it was not delivered, the last attempt's error first


def check_url(url: str) -> str:
    """The webhook URL, if it is one this client can POST to; raises ValueError saying why not."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL with a host")
    return url


def payload(response: pb.SolveResponse) -> dict:
    """What the webhook receives: generic JSON any receiver can route on `status` (check it: an UNVERIFIED
    answer is a best attempt, not a checked one)."""
    answer = response.answer.strip()  # what a person reads; the thinking trace is beside it
    try:
        structured = json.loads(answer)
    except ValueError:
        structured = None
    return {
        "request_id": response.request_id,
        "status": pb.SolveStatus.Name(response.status).removeprefix("SOLVE_STATUS_"),
        "status_reason": response.status_reason,
        "answer": answer,
        "answer_json": structured if isinstance(structured, dict | list) else None,
        "verified_by": list(response.verified_by),
        "trace_id": response.trace_id,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs) -> None:
        return None  # the 3xx is then raised as an HTTPError


OPENER = urllib.request.build_opener(NoRedirects)


def deliver(url: str, body: dict, idempotency_key: str, policy: Policy = Policy()) -> Delivery:
    """POSTs `body` until a 2xx reply, a final refusal, or `policy.attempts` attempts."""
    data = json.dumps(body).encode()
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": idempotency_key,
        "User-Agent": USER_AGENT,
    }
    for attempt in range(1, policy.attempts + 1):
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        retry_after = None
        try:
            with OPENER.open(request, timeout=policy.timeout_s) as reply:
                return Delivery(True, attempt, f"HTTP {reply.status}")
        except urllib.error.HTTPError as error:
            detail = f"HTTP {error.code} {error.reason}{quoted(error)}"
            if error.code not in RETRIED_STATUSES:
                return Delivery(False, attempt, f"refused: {detail}")
            retry_after = retry_after_s(error.headers)
        except (TimeoutError, urllib.error.URLError) as error:  # a timeout while connecting is a URLError
            reason = getattr(error, "reason", error)
            timed_out = isinstance(reason, TimeoutError)
            detail = f"no reply within {policy.timeout_s:g} s" if timed_out else f"cannot connect: {reason}"
        except (OSError, http.client.HTTPException) as error:  # reset, closed or garbled mid-reply
            detail = f"connection failed: {type(error).__name__}: {error}"
        if attempt < policy.attempts:
            backoff = min(policy.backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)
            time.sleep(max(backoff, retry_after or 0.0))
    return Delivery(False, policy.attempts, f"not delivered after {policy.attempts} attempts; last: {detail}")


def retry_after_s(headers: Message | None) -> float | None:
    """A `Retry-After` given in seconds, capped; None when absent or given as a date."""
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_S) if value is not None else None
    except ValueError:
        return None


def quoted(error: urllib.error.HTTPError) -> str:
    try:
        text = error.read(MAX_QUOTED_BODY + 1).decode(errors="replace").strip()
    except OSError:
        return ""
    text = " ".join(text.split())
    if len(text) > MAX_QUOTED_BODY:
        text = text[: MAX_QUOTED_BODY - 1] + "…"
    return f": {text}" if text else ""
