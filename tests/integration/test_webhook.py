"""`--notify URL` delivery against a real local HTTP receiver: delivered once, retried after a 503 and a 429
with the same Idempotency-Key, a receiver too slow for the timeout, a receiver that is down, a refusal that is
not retried. No model: these build the final response themselves."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from deliberate.cli.local_redis import free_port
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client import notify
from tests.webhook_receiver import Reply, receiving

FAST = notify.Policy(attempts=3, timeout_s=2.0, backoff_s=0.05)
PLAN = '{"items": [{"sku": "TEA-100", "discount_percent": 10, "quantity": 50}], "message": "Tea week: 10% off."}'


def final_response(request_id: str = "req-42") -> pb.SolveResponse:
    return pb.SolveResponse(
        request_id=request_id,
        answer=PLAN,
        thinking_trace="Thinking: drafts agreed.",
        status=pb.SOLVE_STATUS_VERIFIED,
        status_reason="best draft passed every hard rule",
        verified_by=["stock_check", "margin_check"],
        trace_id="0af7651916cd43dd8448eb211c80319c",
    )


def deliver(url: str, policy: notify.Policy = FAST, request_id: str = "req-42") -> notify.Delivery:
    response = final_response(request_id)
    return notify.deliver(url, notify.payload(response), response.request_id, policy)


def test_the_final_plan_is_delivered_once_as_generic_json():
    with receiving() as receiver:
        delivery = deliver(receiver.url)
    assert delivery == notify.Delivery(True, 1, "HTTP 200")
    [request] = receiver.requests
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Idempotency-Key"] == "req-42"
    body = request.json
    assert body["request_id"] == "req-42"
    assert body["status"] == "VERIFIED"
    assert body["answer"] == PLAN, "the thinking trace is not part of the answer"
    assert body["answer_json"]["items"][0] == {"sku": "TEA-100", "discount_percent": 10, "quantity": 50}
    assert body["verified_by"] == ["stock_check", "margin_check"]
    assert body["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    sent = datetime.fromisoformat(body["timestamp"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - sent).total_seconds()) < 60


def test_a_503_is_retried_with_the_same_idempotency_key_and_body():
    with receiving([Reply(503, body="busy"), Reply(200)]) as receiver:
        delivery = deliver(receiver.url)
    assert delivery == notify.Delivery(True, 2, "HTTP 200")
    first, second = receiver.requests
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"] == "req-42"
    assert first.body == second.body, "the same delivery, timestamp included"
    assert second.at - first.at >= FAST.backoff_s


def test_a_429_waits_as_long_as_its_retry_after_says():
    with receiving([Reply(429, headers={"Retry-After": "1"}), Reply(200)]) as receiver:
        delivery = deliver(receiver.url)
    assert delivery.delivered and delivery.attempts == 2
    first, second = receiver.requests
    assert second.at - first.at >= 1.0


def test_a_receiver_slower_than_the_timeout_is_retried_and_keeps_the_plan_once():
    """The receiver kept the plan but answered too late; the retry carries the same key, so the plan is kept
    once however many attempts reached it."""
    policy = notify.Policy(attempts=2, timeout_s=0.3, backoff_s=0.05)
    started = time.monotonic()
    with receiving([Reply(200, delay_s=1.5)]) as receiver:
        delivery = deliver(receiver.url, policy)
        assert len(receiver.requests) == 2
    assert not delivery.delivered
    assert delivery.detail == "not delivered after 2 attempts; last: no reply within 0.3 s"
    assert time.monotonic() - started < 1.5 + 1.0, "each attempt gave up at its timeout"
    assert list(receiver.kept) == ["req-42"], "two attempts, one delivery kept"


def test_a_receiver_that_is_down_is_reported_after_every_attempt():
    url = f"http://127.0.0.1:{free_port()}/hook"
    delivery = deliver(url, notify.Policy(attempts=3, timeout_s=1.0, backoff_s=0.05))
    assert not delivery.delivered and delivery.attempts == 3
    assert delivery.detail.startswith("not delivered after 3 attempts; last: cannot connect: ")
    assert "Connection refused" in delivery.detail


def test_a_refusal_is_final_and_quotes_the_receiver():
    with receiving([Reply(400, body='{"error": "unknown sku TEA-100"}')]) as receiver:
        delivery = deliver(receiver.url)
    assert delivery == notify.Delivery(False, 1, 'refused: HTTP 400 Bad Request: {"error": "unknown sku TEA-100"}')
    assert len(receiver.requests) == 1


def test_a_redirect_is_not_followed():
    """Following a 302 would turn the POST into a GET and report a delivery that never happened."""
    with receiving([Reply(302, headers={"Location": "/elsewhere"})]) as receiver:
        delivery = deliver(receiver.url)
    assert not delivery.delivered and delivery.detail.startswith("refused: HTTP 302")
    assert len(receiver.requests) == 1


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--notify", "ftp://example.com/hook"], "is not an http:// or https:// URL with a host"),
        (["--notify", "http:///hook"], "is not an http:// or https:// URL with a host"),
        (["--notify-status", "verified,failed"], "choose among verified, computation_checked, unchecked, unverified"),
        (["--notify-attempts", "0"], "must be > 0"),
    ],
)
def test_bad_notify_flags_are_refused_before_anything_is_solved(flags, error):
    """The address leads nowhere: a refusal must come from the flags, not from a failed connection."""
    done = subprocess.run(
        [sys.executable, "-m", "deliberate_client.cli", "solve", "2+2?", "--address", "127.0.0.1:1", *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert error in done.stderr
    assert "UNAVAILABLE" not in done.stderr
