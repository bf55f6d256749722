"""Reading metrics in tests: the instruments of this process (an in-memory reader behind the global meter
provider), and the Prometheus `/metrics` page of a real service."""

from __future__ import annotations

import urllib.request

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client.parser import text_string_to_metric_families

_reader: InMemoryMetricReader | None = None


def in_process_reader() -> InMemoryMetricReader:
    """The reader behind this process's global meter provider (set once: the API allows no second one)."""
    global _reader
    if _reader is None:
        _reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider([_reader]))
    return _reader


def in_process_value(name: str, **labels: str) -> float:
    """The sum of the data points of OpenTelemetry instrument `name` whose attributes include `labels`
    (a histogram's count); 0 before any."""
    total = 0.0
    data = in_process_reader().get_metrics_data()  # None before anything was recorded
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    if labels.items() <= dict(point.attributes).items():
                        total += getattr(point, "value", getattr(point, "count", 0))
    return total


Samples = dict[tuple[str, frozenset], float]


def scrape(url: str, timeout_s: float = 5.0) -> Samples:
    """Every sample of a Prometheus text page, keyed by (sample name, its labels)."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels`; 0 when there is none."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def has(samples: Samples, name: str, **labels: str) -> bool:
    wanted = set(labels.items())
    return any(n == name and wanted <= ls for n, ls in samples)
