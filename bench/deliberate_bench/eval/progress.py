"""What an evaluation reports while it runs: the services' peak memory and a progress line."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from deliberate.cli.stack import Stack


def vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def peak_rss(stack: Stack | None) -> dict[str, float] | None:
    """Peak resident memory (VmHWM) of each service process this eval started; the Verifier is the
    Scheduler's child. None when the services were started elsewhere (`--address`)."""
    if stack is None:
        return None
    peaks = {}
    for service, process in stack.processes.items():
        peak = vm_hwm_mb(process.pid)
        if peak is not None:
            peaks[service] = peak
        if service == "scheduler":
            for child in children(process.pid):
                peak = vm_hwm_mb(child)
                if peak is not None:
                    peaks["verifier"] = max(peaks.get("verifier", 0.0), peak)
    return peaks


class Progress:
    """tqdm on stderr when it is installed, else one line rewritten in place with a count and an ETA."""

    def __init__(self, total: int, done: int):
        self.total, self.done, self.started, self.start_done = total, done, time.monotonic(), done
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="problem", file=sys.stderr, dynamic_ncols=True)
        except ImportError:
            self.bar = None
        self.show("")

    def update(self, note: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(1)
        else:
            self.show(note)

    def show(self, note: str) -> None:
        if self.bar is not None:
            return
        elapsed = time.monotonic() - self.started
        made = self.done - self.start_done
        eta = f"{(self.total - self.done) * elapsed / made / 60:.0f} min" if made else "?"
        line = f"\reval {self.done}/{self.total}  elapsed {elapsed / 60:.1f} min  ETA {eta}  {note}"
        print(line, end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            print(file=sys.stderr)
