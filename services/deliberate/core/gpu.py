"""GPU utilization and memory share through NVML (`nvidia-ml-py`), where this process sees a GPU.

No GPU, no driver or no library (`NVMLError_LibraryNotFound`) means "no GPU", never an error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger("deliberate.gpu")


@dataclass(frozen=True)
class GpuReading:
    utilization: float  # the busiest GPU's compute share, in [0, 1]
    memory: float  # the fullest GPU's memory share, in [0, 1]
    gpus: int


class GpuMonitor:
    """Reads every GPU NVML sees; the busiest counts on each measure.

    Memory counts as well as compute because a GPU whose memory is nearly full cannot take more sequences
    even while its cores wait on the host.
    """

    def __init__(self, nvml) -> None:
        self._nvml = nvml
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]

    @classmethod
    @contextmanager
    def open(cls) -> Iterator[GpuMonitor | None]:
        """A monitor while NVML is initialised, or None where there is no GPU to read."""
        try:
            import pynvml  # optional dependency; absent on CPU-only installs

            pynvml.nvmlInit()
        except Exception as error:  # ImportError, NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
            log.info("no GPU to report", extra={"reason": f"{type(error).__name__}: {error}"})
            yield None
            return
        try:
            monitor = cls(pynvml)
            yield monitor if monitor._handles else None
        finally:
            pynvml.nvmlShutdown()

    def read(self) -> GpuReading:
        rates = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu / 100 for h in self._handles]
        memory = [self._memory_share(h) for h in self._handles]
        return GpuReading(max(rates), max(memory), len(self._handles))

    def _memory_share(self, handle) -> float:
        info = self._nvml.nvmlDeviceGetMemoryInfo(handle)
        return info.used / info.total
