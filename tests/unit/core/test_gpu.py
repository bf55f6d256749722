"""NVML readings for the Drafter's load report. This machine has no GPU: `open` must say so without raising;
the reading itself runs against a stand-in NVML module (a GPU cannot be made to appear here)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deliberate.core.gpu import GpuMonitor


def _has_gpu() -> bool:
    with GpuMonitor.open() as monitor:
        return monitor is not None


@pytest.mark.skipif(_has_gpu(), reason="a GPU is present")
def test_no_gpu_is_none_not_an_error():
    with GpuMonitor.open() as monitor:
        assert monitor is None


class TwoGpus:
    """pynvml's calls, for one busy GPU and one with full memory."""

    devices = [
        {"gpu": 90, "used": 10, "total": 100},
        {"gpu": 20, "used": 95, "total": 100},
    ]

    def nvmlDeviceGetCount(self):  # noqa: N802 (pynvml's naming)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return index

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        return SimpleNamespace(gpu=self.devices[handle]["gpu"])

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        return SimpleNamespace(used=self.devices[handle]["used"], total=self.devices[handle]["total"])


def test_the_busiest_gpu_counts_on_each_measure():
    reading = GpuMonitor(TwoGpus()).read()
    assert (reading.utilization, reading.memory, reading.gpus) == (0.90, 0.95, 2)
