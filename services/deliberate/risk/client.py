"""The Verifier's client of the risk-model service: every call under a timeout, all calls behind one circuit
breaker, so a risk service that is down or slow costs a verification at most one timeout, and after
`failures_to_open` failures in a row nothing at all until `reset_after_s` has passed.

Every failure is `RiskUnavailable`, whose message says what failed; the `credit` pack then fails the offer
(closed): no offer passes without a score. A call the risk service refuses as INVALID_ARGUMENT is the offer's
fault, not the service's, and is `RiskRejected` (it does not count against the breaker).

The channel carries the OpenTelemetry client interceptor: each call is a client span under the span current
in the calling thread (the draft's `verifier.verify_draft`), and the trace context travels to the service.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import grpc
from opentelemetry.instrumentation.grpc import client_interceptor, grpcext

from deliberate_api.risk.v1 import risk_model_service_pb2, risk_model_service_pb2_grpc

from ..core.tls import sync_channel
from .model import Applicant, Offer, Score

# After a failed connection gRPC waits before it tries again, up to 120 s by default, and fails every call at once
# meanwhile: a risk service that came back would stay unreachable long after the breaker's trial. Try every second.
RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class RiskUnavailable(Exception):
    """No score: the service is down, slow or failing, or the breaker is open. The message says which."""


class RiskRejected(Exception):
    """The service refused the inputs (INVALID_ARGUMENT); the message is its own, naming the field."""


class CircuitBreaker:
    """Closed: calls go through, consecutive failures are counted. Open (`failures_to_open` in a row): calls are
    refused at once until `reset_after_s` has passed. Then half-open: one trial call goes through; its success
    closes the breaker, its failure opens it again for another `reset_after_s`. Thread-safe."""

    def __init__(self, failures_to_open: int, reset_after_s: float, clock=time.monotonic):
        self.failures_to_open = failures_to_open
        self.reset_after_s = reset_after_s
        self.clock = clock
        self.lock = threading.Lock()
        self.failures = 0
        self.opened_at: float | None = None
        self.trial_running = False
        self.last_error = ""

    def admit(self) -> bool:
        """Whether the call is the half-open breaker's trial (its caller waits for its outcome before the next
        call); raises RiskUnavailable when the breaker refuses the call."""
        with self.lock:
            if self.opened_at is None:
                return False
            waited = self.clock() - self.opened_at
            if waited < self.reset_after_s or self.trial_running:
                retry_in = max(self.reset_after_s - waited, 0.0)
                raise RiskUnavailable(
                    f"circuit breaker open after {self.failures} failed calls in a row (last: {self.last_error}); "
                    f"next try in {retry_in:.1f} s"
                )
            self.trial_running = True
            return True

    def succeeded(self) -> None:
        with self.lock:
            self.failures, self.opened_at, self.trial_running = 0, None, False

    def failed(self, error: str) -> None:
        with self.lock:
            self.failures += 1
            self.last_error = error
            if self.trial_running or self.failures >= self.failures_to_open:
                self.opened_at = self.clock()
            self.trial_running = False

    @property
    def is_open(self) -> bool:
        with self.lock:
            return self.opened_at is not None


class RiskClient:
    def __init__(
        self,
        address: str,
        timeout_s: float,
        failures_to_open: int = 5,
        reset_after_s: float = 5.0,
        credentials: grpc.ChannelCredentials | None = None,
    ):
        """`credentials`: TLS for the calls (the Verifier's --downstream-tls-* settings); None for plain text."""
        self.address = address
        self.timeout_s = timeout_s
        self.breaker = CircuitBreaker(failures_to_open, reset_after_s)
        # grpcext, not grpc.intercept_channel: the OpenTelemetry interceptor is of its own kind.
        channel = sync_channel(address, credentials, RECONNECT_OPTIONS)
        self.channel = grpcext.intercept_channel(channel, client_interceptor())
        self.stub = risk_model_service_pb2_grpc.RiskModelServiceStub(self.channel)

    def score_all(self, applicant: Applicant, offers: Sequence[Offer]) -> list[Score | Exception]:
        """Scores every offer, the calls all at once (after a half-open breaker's trial call), each under the
        timeout: per offer its Score, or the RiskUnavailable / RiskRejected that says why there is none."""
        calls: list[grpc.Future | Score | Exception] = []
        for offer in offers:
            try:
                trial = self.breaker.admit()
            except RiskUnavailable as refused:
                calls.append(refused)
                continue
            request = risk_model_service_pb2.ScoreRequest(
                applicant=risk_model_service_pb2.Applicant(**vars(applicant)),
                offer=risk_model_service_pb2.Offer(**vars(offer)),
            )
            call = self.stub.Score.future(request, timeout=self.timeout_s)
            calls.append(self.result(call) if trial else call)  # the trial's outcome decides on the next calls
        return [self.result(call) if isinstance(call, grpc.Future) else call for call in calls]

    def result(self, call: grpc.Future) -> Score | Exception:
        try:
            response = call.result()
        except grpc.RpcError as error:
            code = error.code()
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                self.breaker.succeeded()  # the service answered
                return RiskRejected(error.details())
            waited = f" after the {self.timeout_s:g} s timeout" if code == grpc.StatusCode.DEADLINE_EXCEEDED else ""
            problem = f"{code.name}{waited}: {error.details()}"
            self.breaker.failed(problem)
            return RiskUnavailable(f"risk model at {self.address}: {problem}")
        self.breaker.succeeded()
        return Score(
            response.probability_of_default,
            response.loss_given_default,
            response.monthly_payment,
            response.debt_to_income,
            response.model_version,
        )

    def close(self) -> None:
        self.channel.close()
