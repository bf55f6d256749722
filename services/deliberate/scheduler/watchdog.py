"""The Scheduler's watchdog over the Verifier: probe `GET /health`, restart after consecutive failures.

Every `interval_s` (30 s by default) the watchdog asks the Verifier's HTTP health endpoint (core/http_health.py:
200 while serving, 503 otherwise). After `failures_to_restart` consecutive failed probes it restarts the Verifier
through a pluggable restarter:

- `process`: a local Verifier process the Scheduler itself supervises;
- `command`: a command that restarts the Verifier, wherever it runs (any replica can run it);
- `container`: the Docker Engine API on a unix socket (podman's service speaks the same API);
- `kubernetes`: delete the Verifier's pods so their Deployment recreates them.

Several Scheduler replicas may watch one Verifier. With a `lease` (state.py's `RedisLease`, when the Scheduler's
state is in Redis) only the lease holder restarts it; the others keep probing and reporting health. Without one,
the watchdog acts alone, as the single Scheduler of a laptop does.

Each restart raises an alert three ways: a log event, the `deliberate_watchdog_restarts_total` metric counter and a
"verifier.restarted" event on a `watchdog.restart` span.
"""

from __future__ import annotations

import asyncio
import http.client
import inspect
import json
import logging
import os
import shlex
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from opentelemetry import trace

from ..core import metrics

log = logging.getLogger("deliberate.watchdog")

# Span and metric attribute names (the `deliberate.` prefix, as in core/telemetry.py).
RESTARTER = "deliberate.watchdog.restarter"
FAILURES = "deliberate.watchdog.consecutive_failures"
ACTION = "deliberate.watchdog.action"
# While a starting or restarted Verifier is awaited, it is probed at least this often (seconds).
GRACE_PROBE_S = 1.0


class RestartError(RuntimeError):
    """A restarter could not restart the Verifier; the message says why."""


class Restarter(Protocol):
    name: str

    async def restart(self) -> str:
        """Restarts the Verifier and returns a short description of what it did; raises on failure."""
        ...


class Lease(Protocol):
    holder: str

    async def held(self) -> bool:
        """Takes or renews the lease; True while this holder has it."""
        ...

    async def release(self) -> None: ...


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
    """`kind` is process, container, kubernetes or none; settings are the chosen restarter's keyword arguments.

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


# --- the watchdog ---------------------------------------------------------------------------------------------------


def stop_if_cancelled() -> None:
    """Honours a cancellation that an await swallowed: redis-py's read timeout racing a task's cancel (Python
    3.11's `asyncio.timeout`) can drop the CancelledError, and the loop would then never stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Watchdog:
    """Probes `url` every `interval_s`; after `failures_to_restart` consecutive failures, restarts the target once.

    After a restart, failures are not counted for `restart_grace_s` (the Verifier is booting), nor for
    `startup_grace_s` (default: the same) after `run()` starts; the first healthy probe ends either grace early.
    A restarter that raises is logged and tried again at the next threshold.
    Run it as a task (`asyncio.create_task(watchdog.run())`) and cancel the task to stop it.
    """

    def __init__(
        self,
        url: str,
        restarter: Restarter,
        interval_s: float = 30.0,
        failures_to_restart: int = 3,
        timeout_s: float = 2.0,
        restart_grace_s: float = 60.0,
        startup_grace_s: float | None = None,
        on_restart: Callable[[str], object] | None = None,
        lease: Lease | None = None,
    ):
        if failures_to_restart < 1:
            raise ValueError("failures_to_restart must be at least 1")
        self.url = url
        self.restarter = restarter
        self.interval_s = interval_s
        self.failures_to_restart = failures_to_restart
        self.timeout_s = timeout_s
        self.restart_grace_s = restart_grace_s
        self.startup_grace_s = restart_grace_s if startup_grace_s is None else startup_grace_s
        self.on_restart = on_restart
        self.lease = lease
        self.acting = lease is None  # may restart; with a lease, only while holding it

        self.healthy = False  # until the first probe says otherwise
        self.consecutive_failures = 0
        self.restarts = 0
        self.restart_failures = 0
        self.last_restart_at: float | None = None  # wall-clock seconds since the epoch
        self.last_restart = ""  # the restarter's description, or why it failed
        self.last_error = ""  # why the last failed probe failed
        self.last_probe_at: float | None = None
        self._grace_until: float | None = None  # monotonic
        self._healthy_event = asyncio.Event()

        # Probes go straight to the Verifier: a proxy from the environment must not stand in between.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.tracer = trace.get_tracer("deliberate.watchdog")

    @property
    def in_grace(self) -> bool:
        return self._grace_until is not None and time.monotonic() < self._grace_until

    async def run(self) -> None:
        # The series exist (at 0) from the start, so a dashboard's increase() sees the first one. Not in __init__:
        # the service's meter provider is installed later, and a proxy drops what it is given before that.
        metrics.RESTARTS.add(0, {"restarter": self.restarter.name})
        metrics.HEARTBEAT_FAILURES.add(0)
        # The Verifier may be booting alongside the Scheduler (and is, for the process restarter).
        self._grace_until = time.monotonic() + self.startup_grace_s
        try:
            while True:
                self.record(await self.probe())
                await self.update_role()
                stop_if_cancelled()
                if self.consecutive_failures >= self.failures_to_restart:
                    if self.acting:
                        await self.restart()
                    elif self.consecutive_failures == self.failures_to_restart:  # once per outage
                        log.warning(
                            "verifier unhealthy; the lease holder restarts it",
                            extra={"url": self.url, "failures": self.consecutive_failures},
                        )
                await asyncio.sleep(self.next_probe_in())
        finally:
            if self.lease is not None and self.acting:
                await self.lease.release()  # the next holder need not wait for the expiry

    def next_probe_in(self) -> float:
        """The heartbeat interval; while a starting or restarted Verifier is awaited (grace, not yet healthy), at
        most GRACE_PROBE_S, so health (GetState, `deliberate_verifier_up`) turns true soon after it answers."""
        if self.in_grace and not self.healthy:
            return min(self.interval_s, GRACE_PROBE_S)
        return self.interval_s

    async def update_role(self) -> None:
        """With a lease, take or renew it on every heartbeat (its expiry is several heartbeats long)."""
        if self.lease is None:
            return
        acting = await self.lease.held()
        if acting != self.acting:
            log.info(
                "watchdog lease %s", "taken: this replica restarts the Verifier" if acting else "lost: observing only"
            )
        if acting and not self.acting and not self.healthy:
            # The previous holder may be restarting the Verifier (a restart longer than the lease lets the lease
            # lapse): failures seen while observing do not count, and the restart grace applies. A Verifier that
            # answered the last probe is not being restarted: its next failures count at once.
            self.consecutive_failures = 0
            self._grace_until = time.monotonic() + self.restart_grace_s
        self.acting = acting

    async def probe(self) -> bool:
        """One `GET url` in a worker thread, so a slow Verifier never blocks the Scheduler's event loop."""
        ok, self.last_error = await asyncio.to_thread(self._probe)
        self.last_probe_at = time.time()
        return ok

    def _probe(self) -> tuple[bool, str]:
        try:
            with self._opener.open(self.url, timeout=self.timeout_s) as response:
                return (True, "") if response.status == 200 else (False, f"HTTP {response.status}")
        except urllib.error.HTTPError as error:  # a 503 while not serving lands here
            return False, f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:  # refused, unreachable, timed out
            reason = getattr(error, "reason", error)
            return False, f"{type(reason).__name__}: {reason}"

    def record(self, ok: bool) -> None:
        self.healthy = ok
        if ok:
            self.consecutive_failures = 0
            self._grace_until = None
            self._healthy_event.set()
            return
        self._healthy_event.clear()
        metrics.HEARTBEAT_FAILURES.add(1)
        if not self.in_grace:
            self.consecutive_failures += 1

    async def restart(self) -> None:
        failures, self.consecutive_failures = self.consecutive_failures, 0
        attributes = {RESTARTER: self.restarter.name}
        with self.tracer.start_as_current_span(
            "watchdog.restart", attributes={**attributes, FAILURES: failures}
        ) as span:
            try:
                description = await self.restarter.restart()
            except Exception as error:  # the loop must survive; the next threshold tries again
                self.restart_failures += 1
                self.last_restart = f"failed: {error}"
                span.record_exception(error)
                span.set_status(trace.StatusCode.ERROR, str(error))
                log.error(
                    "verifier restart failed",
                    extra={
                        "url": self.url,
                        "restarter": self.restarter.name,
                        "failures": failures,
                        "error": str(error),
                    },
                    exc_info=not isinstance(error, RestartError),  # a traceback only for the unexpected
                )
                return
            self.restarts += 1
            self.last_restart_at = time.time()
            self.last_restart = description
            self._grace_until = time.monotonic() + self.restart_grace_s
            span.add_event("verifier.restarted", {FAILURES: failures, ACTION: description})
            metrics.RESTARTS.add(1, {"restarter": self.restarter.name})
            log.warning(
                "verifier restarted",
                extra={
                    "url": self.url,
                    "restarter": self.restarter.name,
                    "failures": failures,
                    "action": description,
                    "restarts": self.restarts,
                },
            )
        await self._notify(description)

    async def _notify(self, description: str) -> None:
        if self.on_restart is None:
            return
        try:
            result = self.on_restart(description)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("on_restart callback failed")

    async def wait_healthy(self, timeout_s: float | None) -> bool:
        """True once a probe has found the target healthy, False if `timeout_s` passes first (None: no limit)."""
        if self.healthy:
            return True
        try:
            await asyncio.wait_for(self._healthy_event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def snapshot(self) -> dict:
        """The watchdog's state for the Scheduler's GetState RPC."""
        return {
            "url": self.url,
            "restarter": self.restarter.name,
            "role": "acting" if self.acting else "observing",
            "lease_holder": self.lease.holder if self.lease is not None else None,
            "healthy": self.healthy,
            "consecutive_failures": self.consecutive_failures,
            "failures_to_restart": self.failures_to_restart,
            "interval_s": self.interval_s,
            "in_restart_grace": self.in_grace,
            "restarts": self.restarts,
            "restart_failures": self.restart_failures,
            "last_restart_at": self.last_restart_at,
            "last_restart": self.last_restart,
            "last_probe_at": self.last_probe_at,
            "last_error": self.last_error,
        }
