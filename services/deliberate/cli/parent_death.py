"""Child processes that end with the process that started them: the services of `deliberate up` (and of every
Stack) must not outlive it however it ends (a second signal during its shutdown, SIGKILL, a crash), or they keep
their ports and the next `deliberate up` finds them taken.

Each child starts as `python -m deliberate.cli.parent_death [--parent PID] -- COMMAND …`: that asks the kernel for
SIGTERM when its parent ends (prctl PR_SET_PDEATHSIG; Linux), then becomes COMMAND (exec: the same pid, so Popen
and the supervisors see the service itself). SIGTERM rather than SIGKILL: each service drains as on a stop of
`deliberate up` (the Scheduler stops its Verifier, Redis writes its file), within its --shutdown-grace-s. A process
in a session of its own (setsid) still gets the signal.

The kernel sends it when the *thread* that started the child ends, not the process: `spawn` starts every child
from one thread that lives as long as the process, so a service restarted by a Supervisor that a thread of its own
drives (the tests, the soak) does not end with that thread.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

MODULE = "deliberate.cli.parent_death"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_DEATH_SIGNAL = signal.SIGTERM


def spawn(command: list[str], **popen_args: object) -> subprocess.Popen:
    """`subprocess.Popen(command, **popen_args)`, but the process gets SIGTERM once this process ends."""
    command = dying_with_parent(command, parent=os.getpid())
    return spawner().submit(subprocess.Popen, command, **popen_args).result()


def dying_with_parent(command: list[str], parent: int | None = None) -> list[str]:
    """`command` started through this module. `parent`: the pid of the process that starts it (it ends at once if
    that one already ended); None: whichever process starts it (the Scheduler, for its Verifier)."""
    if not sys.platform.startswith("linux"):  # the parent-death signal is Linux's
        return list(command)
    expected = ["--parent", str(parent)] if parent is not None else []
    return [sys.executable, "-m", MODULE, *expected, "--", *command]


_spawner: tuple[int, ThreadPoolExecutor] | None = None
_spawner_lock = threading.Lock()


def spawner() -> ThreadPoolExecutor:
    """The process's one starting thread, created on first use (its worker thread ends at interpreter exit)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():  # a forked child has the executor, not its thread
            _spawner = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner"))
        return _spawner[1]


def main(argv: list[str]) -> None:
    parent, command = parse(argv)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(*(ctypes.c_ulong(n) for n in (PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL, 0, 0, 0))) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # A disposition of SIG_IGN survives exec: a parent that ignores SIGTERM must not make its children deaf to it.
    signal.signal(PARENT_DEATH_SIGNAL, signal.SIG_DFL)
    if os.getppid() != parent:  # it ended before the kernel was asked: no signal will come, so end as if it had
        signal.raise_signal(PARENT_DEATH_SIGNAL)
    os.execvp(command[0], command)


def parse(argv: list[str]) -> tuple[int, list[str]]:
    """(the expected parent's pid, the command) from `[--parent PID] -- COMMAND …`."""
    parent = os.getppid()
    if argv[:1] == ["--parent"]:
        parent, argv = int(argv[1]), argv[2:]
    if argv[:1] != ["--"] or len(argv) < 2:
        sys.exit(f"usage: python -m {MODULE} [--parent PID] -- COMMAND [ARG ...]")
    return parent, argv[1:]


if __name__ == "__main__":
    main(sys.argv[1:])
