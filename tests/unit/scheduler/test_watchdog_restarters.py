"""The Verifier's restarters (scheduler/watchdog/restarters.py) against a real child process, real commands, and
fake engine and cluster APIs."""

from __future__ import annotations

import asyncio
import json
import shutil
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from deliberate.scheduler.watchdog.restarters import (
    CommandRestarter,
    ContainerRestarter,
    KubernetesRestarter,
    NoRestarter,
    ProcessRestarter,
    RestartError,
    build_restarter,
)

# --- process: a stubborn child --------------------------------------------------------------------------------------


def test_process_restarter_kills_a_verifier_that_ignores_sigterm():
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    )
    restarter = ProcessRestarter([sys.executable, "-c", stubborn], kill_grace_s=0.2)
    first_pid = restarter.start()
    time.sleep(0.2)  # let it install the handler
    description = asyncio.run(restarter.restart())
    try:
        assert description == f"process pid {first_pid} (killed, exit code -9) replaced by pid {restarter.pid}"
    finally:
        restarter.process.kill()
        restarter.process.wait()


# --- container: a fake Docker Engine API on a unix socket -----------------------------------------------------------


class FakeEngine(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, socket_path: Path, containers: set[str]):
        self.requests: list[tuple[str, str]] = []
        self.containers = containers
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                engine.requests.append(("POST", self.path))
                name = self.path.split("/")[2]
                if name in engine.containers:
                    self.send_response(204)
                    self.end_headers()
                    return
                payload = json.dumps({"message": f"No such container: {name}"}).encode()
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:  # a unix peer has no address to log
                pass

        super().__init__(str(socket_path), Handler)
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()


def test_container_restarter_posts_restart_to_the_engine_api(tmp_path):
    socket_path = tmp_path / "docker.sock"
    engine = FakeEngine(socket_path, containers={"deliberate-verifier"})
    try:
        description = asyncio.run(ContainerRestarter("deliberate-verifier", socket_path=str(socket_path)).restart())
        assert engine.requests == [("POST", "/containers/deliberate-verifier/restart?t=5")]
        assert description == f"container deliberate-verifier restarted via {socket_path}"

        with pytest.raises(RestartError, match=r"HTTP 404: No such container: ghost"):
            asyncio.run(ContainerRestarter("ghost", socket_path=str(socket_path)).restart())
    finally:
        engine.shutdown()
        engine.server_close()


def test_container_restarter_without_an_engine_raises(tmp_path):
    with pytest.raises(OSError):
        asyncio.run(ContainerRestarter("v", socket_path=str(tmp_path / "missing.sock")).restart())


# --- kubernetes: a fake API server over TLS -------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command for a test certificate")
def test_kubernetes_restarter_deletes_the_matching_pods(tmp_path):
    account = tmp_path / "serviceaccount"
    account.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(tmp_path / "key.pem"), "-out", str(account / "ca.crt"), "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    (account / "token").write_text("secret-token\n")
    (account / "namespace").write_text("deliberate\n")
    requests: list[tuple[str, str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def answer(self, status: int, body: dict) -> None:
            requests.append((self.command, self.path, self.headers["Authorization"]))
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            pods = [{"metadata": {"name": "verifier-a"}}, {"metadata": {"name": "verifier-b"}}]
            self.answer(200, {"kind": "PodList", "items": pods})

        def do_DELETE(self) -> None:  # noqa: N802 (http.server's naming)
            self.answer(200, {"kind": "Pod"})

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(account / "ca.crt", tmp_path / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        restarter = KubernetesRestarter(
            label_selector="app=verifier",
            service_account_dir=account,
            api_host="127.0.0.1",
            api_port=server.server_port,
        )
        description = asyncio.run(restarter.restart())
    finally:
        server.shutdown()
        server.server_close()

    pods = "/api/v1/namespaces/deliberate/pods"
    auth = "Bearer secret-token"
    assert requests == [
        ("GET", f"{pods}?labelSelector=app%3Dverifier", auth),
        ("DELETE", f"{pods}/verifier-a", auth),
        ("DELETE", f"{pods}/verifier-b", auth),
    ]
    assert description == "deleted pod(s) verifier-a, verifier-b in namespace deliberate"


# --- build_restarter ------------------------------------------------------------------------------------------------


def test_build_restarter_picks_the_kind(tmp_path):
    process = build_restarter("process", command="python -m deliberate.verifier", env=None)
    assert isinstance(process, ProcessRestarter) and process.command == ["python", "-m", "deliberate.verifier"]
    container = build_restarter("container", container="v", socket_path=str(tmp_path / "d.sock"))
    assert isinstance(container, ContainerRestarter) and container.name == "container"
    assert isinstance(build_restarter("none"), NoRestarter)
    with pytest.raises(RestartError, match="no restarter"):
        asyncio.run(build_restarter("none").restart())
    with pytest.raises(ValueError, match="restarter must be one of"):
        build_restarter("systemd")


# --- command: anything that restarts the Verifier -------------------------------------------------------------------


def test_command_restarter_runs_the_command_and_reports_its_output(tmp_path):
    marker = tmp_path / "restarted"
    restarter = build_restarter("command", command=f"sh -c 'touch {marker}; echo verifier back'")
    assert isinstance(restarter, CommandRestarter)
    assert asyncio.run(restarter.restart()) == f"ran \"sh -c 'touch {marker}; echo verifier back'\": verifier back"
    assert marker.exists()


def test_command_restarter_failure_says_why():
    restarter = CommandRestarter("sh -c 'echo no such unit >&2; exit 5'")
    with pytest.raises(RestartError, match="exited with code 5: no such unit"):
        asyncio.run(restarter.restart())
    with pytest.raises(RestartError, match="could not run"):
        asyncio.run(CommandRestarter("/nonexistent/restart-verifier").restart())


def test_command_restarter_returns_while_a_process_it_started_keeps_running():
    # The restarted Verifier outlives the command and holds its output; the watchdog must not wait for it.
    restarter = CommandRestarter("sh -c 'sleep 3 & echo started'", timeout_s=2.0)
    started = time.monotonic()
    assert asyncio.run(restarter.restart()).endswith("started")
    assert time.monotonic() - started < 2.0
