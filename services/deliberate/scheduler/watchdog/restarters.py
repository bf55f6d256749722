"""How the watchdog (watchdog.py) restarts an unhealthy Verifier: one restarter per way the Verifier is run.

- `process`: a local Verifier process the Scheduler itself supervises;
- `command`: a command that restarts the Verifier, wherever it runs (any replica can run it);
- `container`: the Docker Engine API on a unix socket (podman's service speaks the same API);
- `kubernetes`: delete the Verifier's pods so their Deployment recreates them;
- `none`: watch and alert, never restart.

`build_restarter` picks one by name (the Scheduler's `--restarter`). Each `restart()` returns a short description
of what it did, or raises `RestartError` saying why it could not.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shlex
import signal
import socket
import ssl
import subprocess
import tempfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class RestartError(RuntimeError):
    """A restarter could not restart the Verifier; the message says why."""


class Restarter(Protocol):
    name: str

    async def restart(self) -> str:
        """Restarts the Verifier and returns a short description of what it did; raises on failure."""
        ...


# --- process: a Verifier the Scheduler launched itself --------------------------------------------------------------


class ProcessRestarter:
    """Supervises a local Verifier process: `start()` at Scheduler startup, `restart()` on failure, `stop()` at exit."""

    name = "process"

    def __init__(
        self,
        command: list[str] | str,
        env: dict[str, str] | None = None,
        log_path: Path | str | None = None,
        kill_grace_s: float = 2.0,
    ):
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        self.env = env or {}
        self.log_path = Path(log_path) if log_path else None
        self.kill_grace_s = kill_grace_s
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> int:
        """Launches the Verifier and returns its pid; without a log_path it writes to the Scheduler's own stderr."""
        output = None  # inherit: both services log JSON lines that name their service
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            output = open(self.log_path, "ab")  # noqa: SIM115 (closed below; the child keeps its own copy)
        try:
            # Own session, like services/deliberate/cli/stack.py: a Ctrl-C meant for the Scheduler does not
            # reach the Verifier, and the whole process group can be killed at once.
            self.process = subprocess.Popen(
                self.command,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=True,
            )
        finally:
            if output is not None:
                output.close()
        return self.process.pid

    async def restart(self) -> str:
        return await asyncio.to_thread(self._restart)

    def _restart(self) -> str:
        old = self.process
        # A hung Verifier gets only a short grace: it is already failing its health checks.
        ended = self._terminate(self.kill_grace_s) if old else "none running"
        pid = self.start()
        return f"process pid {old.pid if old else '-'} ({ended}) replaced by pid {pid}"

    def stop(self, grace_s: float = 10.0) -> str:
        """On Scheduler shutdown: SIGTERM (a graceful drain), SIGKILL whatever is left after `grace_s`."""
        return self._terminate(grace_s) if self.process else "none running"

    def _terminate(self, grace_s: float) -> str:
        process = self.process
        assert process is not None
        self._signal_group(process, signal.SIGTERM)
        try:
            code = process.wait(grace_s)
        except subprocess.TimeoutExpired:
            code = None
        # SIGKILL the group even when the leader exited: children it spawned may still hold the ports.
        self._signal_group(process, signal.SIGKILL)
        if code is None:
            code = process.wait()
            return f"killed, exit code {code}"
        return f"exit code {code}"

    @staticmethod
    def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
        try:
            os.killpg(process.pid, sig)  # the child leads its own session, so its pid is the group id
        except ProcessLookupError:
            pass


# --- command: anything that restarts the Verifier, shared by every replica ------------------------------------------


class CommandRestarter:
    """Runs `command` (a script, `systemctl restart deliberate-verifier`, …); exit status 0 means restarted.

    Suits a Verifier that no Scheduler owns: every replica can run the same command, and the watchdog lease
    decides which one does. The command should return once the restart is under way; a process it leaves
    running may keep its output, which goes to a file, never a pipe the watchdog waits on.
    """

    name = "command"

    def __init__(self, command: str, timeout_s: float = 60.0):
        if not command:
            raise ValueError("restarter=command needs a command")
        self.command = command
        self.timeout_s = timeout_s

    async def restart(self) -> str:
        return await asyncio.to_thread(self._restart)

    def _restart(self) -> str:
        with tempfile.TemporaryFile() as output:
            try:
                code = subprocess.run(
                    shlex.split(self.command),
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    timeout=self.timeout_s,
                ).returncode
            except subprocess.TimeoutExpired as error:
                raise RestartError(f"{self.command!r} did not finish within {self.timeout_s:.0f}s") from error
            except OSError as error:
                raise RestartError(f"{self.command!r} could not run: {error}") from error
            output.seek(0)
            said = output.read()[-500:].decode(errors="replace").strip()
        if code != 0:
            raise RestartError(f"{self.command!r} exited with code {code}: {said or '(no output)'}")
        return f"ran {self.command!r}" + (f": {said}" if said else "")


# --- container: the Docker Engine API (or podman's) on a unix socket ------------------------------------------------


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX socket; the host name only fills the Host header the Engine API requires."""

    def __init__(self, socket_path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


DOCKER_SOCKET = "/var/run/docker.sock"
PODMAN_SOCKET = "/run/podman/podman.sock"


def default_engine_socket() -> str:
    """$DOCKER_HOST when it names a unix socket, else Docker's socket, else podman's when only that one exists."""
    docker_host = os.environ.get("DOCKER_HOST", "")
    if docker_host.startswith("unix://"):
        return docker_host.removeprefix("unix://")
    if not os.path.exists(DOCKER_SOCKET) and os.path.exists(PODMAN_SOCKET):
        return PODMAN_SOCKET
    return DOCKER_SOCKET


class ContainerRestarter:
    """`POST /containers/{name}/restart?t=N` on the Engine API: stop (SIGTERM, SIGKILL after N s), then start."""

    name = "container"

    def __init__(self, container: str, socket_path: str | None = None, stop_timeout_s: int = 5):
        self.container = container
        self.socket_path = socket_path or default_engine_socket()
        self.stop_timeout_s = stop_timeout_s

    async def restart(self) -> str:
        return await asyncio.to_thread(self._restart)

    def _restart(self) -> str:
        path = f"/containers/{urllib.parse.quote(self.container, safe='')}/restart?t={self.stop_timeout_s}"
        # The engine answers only once the container is running again, so wait longer than its stop timeout.
        connection = UnixHTTPConnection(self.socket_path, timeout=self.stop_timeout_s + 30.0)
        try:
            connection.request("POST", path)
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        if not 200 <= response.status < 300:
            raise RestartError(
                f"restart of container {self.container!r} failed: HTTP {response.status}: {error_message(body)}"
            )
        return f"container {self.container} restarted via {self.socket_path}"


def error_message(body: bytes) -> str:
    """The `message` of a Docker or Kubernetes error body, else the body itself (shortened)."""
    try:
        return str(json.loads(body)["message"])
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace").strip()[:500] or "(empty body)"


# --- kubernetes: delete the pods; their Deployment recreates them ---------------------------------------------------

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubernetesRestarter:
    """Deletes the Verifier's pods through the in-cluster API server; their Deployment recreates them.

    Runs inside the Scheduler's pod with its service account. That account needs only this Role (plus a
    RoleBinding to it) in the Verifier's namespace:

        apiVersion: rbac.authorization.k8s.io/v1
        kind: Role
        metadata: {name: deliberate-watchdog}
        rules:
          - apiGroups: [""]
            resources: ["pods"]
            verbs: ["get", "list", "delete"]
    """

    name = "kubernetes"

    def __init__(
        self,
        namespace: str | None = None,
        label_selector: str = "app.kubernetes.io/name=verifier",
        service_account_dir: Path | str = SERVICE_ACCOUNT_DIR,
        api_host: str | None = None,
        api_port: int | str | None = None,
        timeout_s: float = 10.0,
    ):
        self.service_account_dir = Path(service_account_dir)
        self.namespace = namespace or (self.service_account_dir / "namespace").read_text().strip()
        self.label_selector = label_selector
        self.api_host = api_host or os.environ["KUBERNETES_SERVICE_HOST"]
        self.api_port = int(api_port or os.environ.get("KUBERNETES_SERVICE_PORT", "443"))
        self.timeout_s = timeout_s

    async def restart(self) -> str:
        return await asyncio.to_thread(self._restart)

    def _restart(self) -> str:
        pods_path = f"/api/v1/namespaces/{urllib.parse.quote(self.namespace, safe='')}/pods"
        status, body = self._request(
            "GET", f"{pods_path}?{urllib.parse.urlencode({'labelSelector': self.label_selector})}"
        )
        if status != 200:
            raise RestartError(f"listing pods {self.label_selector!r} failed: HTTP {status}: {error_message(body)}")
        names = [item["metadata"]["name"] for item in json.loads(body).get("items", [])]
        if not names:
            raise RestartError(f"no pod in namespace {self.namespace} matches {self.label_selector!r}")
        for name in names:
            status, body = self._request("DELETE", f"{pods_path}/{urllib.parse.quote(name, safe='')}")
            # 404: the pod went away on its own meanwhile, which is what we wanted.
            if status not in (200, 202, 404):
                raise RestartError(f"deleting pod {name} failed: HTTP {status}: {error_message(body)}")
        return f"deleted pod(s) {', '.join(names)} in namespace {self.namespace}"

    def _request(self, method: str, path: str) -> tuple[int, bytes]:
        # Read on every call: the kubelet rotates the projected token file.
        token = (self.service_account_dir / "token").read_text().strip()
        context = ssl.create_default_context(cafile=str(self.service_account_dir / "ca.crt"))
        connection = http.client.HTTPSConnection(self.api_host, self.api_port, timeout=self.timeout_s, context=context)
        try:
            connection.request(method, path, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


# --- none: watch and alert, never restart ---------------------------------------------------------------------------


class NoRestarter:
    """Health is still watched (and requests still wait for it); reaching the threshold only logs an error."""

    name = "none"

    async def restart(self) -> str:
        raise RestartError("the Verifier is unhealthy and no restarter is configured (restarter=none)")


def build_restarter(kind: str, **settings) -> Restarter:
    """`kind` is process, command, container, kubernetes or none; settings are the chosen restarter's keyword arguments.

    Settings left at None are dropped, so a caller may pass every optional setting it has.
    """
    settings = {key: value for key, value in settings.items() if value is not None}
    kinds: dict[str, Callable[..., Restarter]] = {
        "process": ProcessRestarter,
        "command": CommandRestarter,
        "container": ContainerRestarter,
        "kubernetes": KubernetesRestarter,
        "none": NoRestarter,
    }
    if kind not in kinds:
        raise ValueError(f"restarter must be one of {', '.join(kinds)}, not {kind!r}")
    return kinds[kind](**settings)
