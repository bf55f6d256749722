"""What the shutdown tests look at: whether a process still runs, the processes a program started (its
descendants, through /proc; Linux), whether a port is free again, and a file that another process writes whole."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts as exited: it runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


def left_running(pids: dict[str, int], grace_s: float = 10) -> dict[str, int]:
    """Those of `pids` still running once all have exited or `grace_s` has passed."""
    deadline = time.monotonic() + grace_s
    while not all(gone(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return {name: pid for name, pid in pids.items() if not gone(pid)}


def descendants(root: int) -> dict[str, int]:
    """Every process below `root` (children, their children, …), named "pid command-line" -> pid."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(") ", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # it exited meanwhile
            children.setdefault(parent, []).append(int(entry.name))
    found, below = {}, list(children.get(root, []))
    while below:
        pid = below.pop()
        found[f"{pid} {command_line(pid)}"] = pid
        below += children.get(pid, [])
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "(exited)"


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Nothing listens on `port` (with SO_REUSEADDR, as the services bind: closed connections of a stopped server,
    in TIME_WAIT, do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def wait_for_json(path: Path, still_writing, timeout_s: float = 300):
    """The JSON another process writes to `path`, once it is there whole. `still_writing()`: False once the writer
    exited (then waiting is over). Written whole means renamed into place, but a reader cannot know that the writer
    did so: an empty or half-written file is read again."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            assert still_writing() and time.monotonic() < deadline, f"{path} was not written"
            time.sleep(0.5)
