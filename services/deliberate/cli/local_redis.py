"""A local `redis-server` for the Schedulers' shared state: `deliberate up --state redis` and the tests start one.

It listens on a loopback port only and keeps its data in `data_dir` as an append-only file (fsync every second,
and on a clean stop), so stopping and starting it again on the same directory keeps what was written.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from .parent_death import spawn


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalRedis:
    def __init__(self, data_dir: Path | str, port: int | None = None, executable: str = "redis-server"):
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.executable = executable
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

    def start(self, timeout_s: float = 15.0) -> LocalRedis:
        """Starts redis-server and returns once it has loaded its data and answers PING; raises with its log's tail
        if it does not."""
        binary = shutil.which(self.executable)
        if binary is None:
            raise FileNotFoundError(f"{self.executable} not found; install it (Debian: apt-get install redis-server)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Own session, as the services in stack.py: a Ctrl-C meant for the launcher does not reach it; spawned, as
        # they are, to end with the launcher however it ends.
        self.process = spawn(
            [
                binary,
                "--bind", "127.0.0.1",
                "--port", str(self.port),
                "--dir", str(self.data_dir.resolve()),
                "--appendonly", "yes",
                "--save", "",
                "--daemonize", "no",
                "--logfile", str(self.log_path.resolve()),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        # Ours must answer: on a port taken by another Redis, that one would. INFO answers while the append-only
        # file is still loading; PING says -LOADING until then, so both must answer before a client may write.
        while self.serving_pid() != self.process.pid or not self.answers_ping():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not start: {self.log_tail()}")
            time.sleep(0.05)
        return self

    def answers_ping(self) -> bool:
        return self._ask(b"PING").startswith(b"+PONG")

    def serving_pid(self) -> int | None:
        """The pid of the Redis that answers on this port (INFO's process_id), None when none answers."""
        for line in self._ask(b"INFO server").splitlines():
            if line.startswith(b"process_id:"):
                return int(line.split(b":", 1)[1])
        return None

    def _ask(self, command: bytes) -> bytes:
        """One inline command, the first reply chunk (enough for PING and INFO server); b"" when nothing answers."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as connection:
                connection.sendall(command + b"\r\n")
                return connection.recv(65536)
        except OSError:
            return b""

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM (Redis flushes its append-only file and exits), SIGKILL if it has not after `timeout_s`."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> LocalRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
