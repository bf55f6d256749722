"""Prometheus metrics for every service: OpenTelemetry instruments, read by the SDK's Prometheus exporter and
served at `GET /metrics` on the service's metrics port.

The instruments are defined here, once, so names, units and labels live in one place (docs/telemetry.md
lists them). The exporter turns `deliberate.stage.duration` with unit `s` into
`deliberate_stage_duration_seconds` and a counter `deliberate.drafts` into `deliberate_drafts_total`. Labels
take few values: outcomes, statuses, stages, engine names, and rule ids capped by `BoundedLabel` (a client
names its own constraints); never a request or draft id.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

# Request stages take from milliseconds (select) to minutes (drafting on a busy CPU).
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
TOKEN_BUCKETS = (8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024)
# Distinct rule ids kept as label values; later ones are counted as "other".
MAX_RULE_IDS = 64

meter = metrics.get_meter("deliberate")

# Scheduler: one request's stages, drafts, verdicts, rounds and answer.
STAGE_DURATION = meter.create_histogram(
    "deliberate.stage.duration", unit="s", description="Wall time of one request's stage; stage=draft|verify|"
    "select|refine|total (draft and verify summed over the rounds)."
)  # fmt: skip
DRAFTS = meter.create_counter(
    "deliberate.drafts", unit="{draft}", description="Drafts by outcome: generated, then valid or invalid, then "
    "selected, discarded, aborted or abandoned; duplicate and timed_out besides."
)  # fmt: skip
RULE_RESULTS = meter.create_counter(
    "deliberate.rule.results", unit="{result}", description="Rule results of the drafts' verdicts by rule id and "
    "outcome (passed, failed, abstained)."
)  # fmt: skip
REDRAFT_ROUNDS = meter.create_counter(
    "deliberate.redraft.rounds", unit="{round}", description="Re-drafting rounds run because no draft passed."
)
SOLVES = meter.create_counter(
    "deliberate.solves", unit="{solve}", description="Finished requests by status: verified, computation_checked, "
    "unchecked, unverified, failed, or the gRPC code of an error (deadline_exceeded, cancelled, invalid_argument, ...)."
)  # fmt: skip
# Scheduler: the Verifier watchdog.
HEARTBEAT_FAILURES = meter.create_counter(
    "deliberate.watchdog.heartbeat.failures", unit="{heartbeat}", description="Failed Verifier health probes."
)
RESTARTS = meter.create_counter(
    "deliberate.watchdog.restarts", unit="{restart}", description="Verifier restarts by the watchdog; restarter."
)
# Verifier.
VERIFICATION_DURATION = meter.create_histogram(
    "deliberate.verification.duration", unit="s", description="Rules (and judge) on one draft; valid=true|false."
)
# Refiner.
REFINE_TOKEN_BUDGET = meter.create_histogram(
    "deliberate.refine.token_budget", unit="{token}", description="Token budget chosen for the final answer."
)
# Scheduler: drafts per Drafter replica (scheduler/replicas.py); replica=host:port, at most 64 distinct.
REPLICA_DRAFTS = meter.create_counter(
    "deliberate.replica.drafts", unit="{draft}", description="Drafts by Drafter replica and outcome: generated "
    "there, or moved away after the replica was lost mid-round."
)  # fmt: skip
# Every service: work calls admitted, by method; on each replica's /metrics, the share of the calls it served.
ADMITTED_CALLS = meter.create_counter(
    "deliberate.rpc.admitted", unit="{call}", description="Work calls admitted (within --max-in-flight); method."
)
# Every service: calls refused because its work methods' in-flight bound was reached (core/admission.py).
REJECTED_CALLS = meter.create_counter(
    "deliberate.rpc.rejected", unit="{call}", description="Work calls answered RESOURCE_EXHAUSTED: the service's "
    "--max-in-flight calls were in flight (reason bound), or the deadline was out of reach (reason deadline, "
    "--admit-by-deadline); method, reason."
)  # fmt: skip


class BoundedLabel:
    """Passes the first `limit` distinct values through and maps every later one to "other"."""

    def __init__(self, limit: int):
        self.limit = limit
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, value: str) -> str:
        with self.lock:
            if value in self.seen:
                return value
            if len(self.seen) < self.limit:
                self.seen.add(value)
                return value
        return "other"


rule_label = BoundedLabel(MAX_RULE_IDS)
# Replica addresses change as pods come and go: the first 64 are kept, later ones counted as "other".
replica_label = BoundedLabel(64)


def rule_outcome(passed: bool, abstained: bool) -> str:
    return "abstained" if abstained else "passed" if passed else "failed"


def count_rule_results(rule_results: Iterable) -> None:
    """`rule_results`: RuleResult messages of one verdict."""
    for result in rule_results:
        RULE_RESULTS.add(
            1, {"rule": rule_label(result.rule_id), "outcome": rule_outcome(result.passed, result.abstained)}
        )


def gauges(name: str, unit: str, description: str, read: Callable[[], Iterable[tuple[float, dict]]]) -> None:
    """An observable gauge whose values `read` returns at every scrape, as (value, labels) pairs."""

    def callback(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, labels) for value, labels in read()]

    meter.create_observable_gauge(name, callbacks=[callback], unit=unit, description=description)


def observe_engine(engine) -> None:
    """Sequences in flight, queued, and the recent speed of `engine` (its `load_report()`), label engine."""
    labels = {"engine": engine.name}
    gauges(
        "deliberate.engine.sequences.running", "{sequence}", "Sequences the engine decodes now.",
        lambda: [(engine.load_report().busy_sequences, labels)],
    )  # fmt: skip
    gauges(
        "deliberate.engine.sequences.queued", "{sequence}", "Sequences waiting for a free engine slot.",
        lambda: [(engine.load_report().queued_sequences, labels)],
    )  # fmt: skip
    gauges(
        "deliberate.engine.tokens_per_second", "", "New tokens per second over the last 30 s, all sequences.",
        lambda: [(engine.load_report().recent_tokens_per_second, labels)],
    )  # fmt: skip


def observe_verifier_health(healthy: Callable[[], bool]) -> None:
    gauges(
        "deliberate.verifier.up", "", "1 while the watchdog's last Verifier heartbeat succeeded, else 0.",
        lambda: [(1.0 if healthy() else 0.0, {})],
    )  # fmt: skip


def observe_in_flight(limit) -> None:
    """The work calls in flight by method, of an `admission.InFlightLimit`; its bound as a gauge beside them."""
    gauges(
        "deliberate.rpc.in_flight", "{call}", "Work calls in flight (admitted, not yet ended); method.",
        lambda: [(count, {"method": method}) for method, count in list(limit.in_flight.items())],
    )  # fmt: skip
    gauges("deliberate.rpc.in_flight.limit", "{call}", "The bound on work calls in flight (--max-in-flight).",
           lambda: [(limit.bound, {})])  # fmt: skip


@dataclass
class MetricsEndpoint:
    provider: MeterProvider
    server: object | None = None  # prometheus_client's HTTP server, None when the port is 0

    def shutdown(self) -> None:
        if self.server is not None:
            self.server.shutdown()
        self.provider.shutdown()


def setup_metrics(service: str, host: str, port: int) -> MetricsEndpoint:
    """Installs the global meter provider; with a port, serves `GET /metrics` there (0: no endpoint, the
    instruments still work)."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import start_http_server

    seconds = ExplicitBucketHistogramAggregation(SECONDS_BUCKETS)
    tokens = ExplicitBucketHistogramAggregation(TOKEN_BUCKETS)
    views = [
        View(instrument_type=Histogram, instrument_unit="s", aggregation=seconds),
        View(instrument_type=Histogram, instrument_unit="{token}", aggregation=tokens),
    ]
    provider = MeterProvider(
        resource=Resource.create({"service.name": f"deliberate-{service}"}),
        metric_readers=[PrometheusMetricReader()],
        views=views,
    )
    metrics.set_meter_provider(provider)
    server = None
    if port:
        server, _ = start_http_server(port, addr=host)
    return MetricsEndpoint(provider, server)
