"""How busy an engine is: its sequences from submission to completion, and the tokens it recently produced.

The Drafter reports this (`GetLoad`) and the Scheduler chooses N from it. Busy and queued are derived from
the sequences in the engine and its capacity: every engine here fills its slots first come, first served.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from .interface import EngineLoad

__all__ = ["LOAD_WINDOW_S", "EngineLoad", "LoadMeter"]

# Completed sequences count towards the recent speed for this long.
LOAD_WINDOW_S = 30.0


class LoadMeter:
    """Counts sequences in the engine and the new tokens of those completed within the last `window_s`.

    `submitted` runs on the event loop, `completed` on the engine's worker threads: hence the lock.
    """

    def __init__(self, window_s: float = LOAD_WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._in_engine = 0
        self._completions: deque[tuple[float, int]] = deque()  # (when, new tokens)

    def submitted(self, sequences: int) -> None:
        with self._lock:
            self._in_engine += sequences

    def completed(self, tokens: int) -> None:
        with self._lock:
            self._in_engine -= 1
            self._completions.append((self._clock(), tokens))

    def abandoned(self, sequences: int) -> None:
        """Sequences that left without a completion (the generation failed)."""
        with self._lock:
            self._in_engine -= sequences

    def snapshot(self, capacity: int) -> EngineLoad:
        now = self._clock()
        with self._lock:
            while self._completions and self._completions[0][0] < now - self.window_s:
                self._completions.popleft()
            tokens = sum(count for _, count in self._completions)
            in_engine = self._in_engine
        busy = min(in_engine, capacity)
        return EngineLoad(busy, in_engine - busy, capacity, tokens / self.window_s, self.window_s)
