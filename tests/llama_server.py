"""A real llama.cpp HTTP server (xllamacpp's, OpenAI-compatible) in its own process on a loopback port, for the
remote engine's tests: `running_llama_server(...)` starts `python -m tests.llama_server` and stops it."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from deliberate.cli.local_redis import free_port

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def running_llama_server(
    model: str, *, port: int | None = None, api_key: str = "", context_per_slot: int = 1024, wait: bool = True
) -> Iterator[str]:
    """The server's OpenAI base URL (`http://127.0.0.1:port/v1`), once its /health answers (unless not `wait`)."""
    port = port or free_port()
    command = [sys.executable, "-m", "tests.llama_server", model, "--port", str(port)]
    command += ["--context-per-slot", str(context_per_slot)]
    if api_key:
        command += ["--api-key", api_key]
    log = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would stall the server
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        if wait:
            wait_healthy(port, process, log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def wait_healthy(port: int, process: subprocess.Popen, log, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"llama.cpp server exited: {log.read().decode(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1.0) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"llama.cpp server on port {port} not healthy after {timeout_s:.0f} s")


def serve(model: str, port: int, api_key: str, context_per_slot: int, parallel: int = 4) -> None:
    import xllamacpp

    from deliberate.engines.models import gguf_file

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_file(model))
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = parallel
    params.n_ctx = parallel * context_per_slot
    params.kv_unified = False  # each slot its own context_per_slot, so a longer prompt is refused
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = min(2, os.cpu_count() or 1)
    params.warmup = False
    params.verbosity = -1
    if api_key:
        params.api_keys = [api_key]
    _server = xllamacpp.Server(params)  # listens until the process ends
    threading.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--context-per-slot", type=int, default=1024)
    args = parser.parse_args()
    serve(args.model, args.port, args.api_key, args.context_per_slot)
