"""Starts the four services, the risk-model service the Verifier's credit pack calls, and the OpenAI-compatible
gateway as separate local processes and waits until each reports SERVING (the gateway: until its GET /health
answers 200).

Used by `deliberate up`, the integration tests and the end-to-end benchmark, so all three run the
stack the same way.
"""

from __future__ import annotations

import os
import shlex
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field, fields
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from deliberate.core.config import flag_name
from deliberate.core.ports import (
    DRAFTER_PORTS,
    GATEWAY_PORT,
    REFINER_PORTS,
    RISK_PORTS,
    SCHEDULER_PORTS,
    VERIFIER_PORTS,
)

from .local_redis import LocalRedis
from .parent_death import dying_with_parent, spawn

# The risk-model service first: the Verifier calls it (docs/business-cases.md).
SERVICES = ("risk", "drafter", "verifier", "refiner", "scheduler")
# HTTP in front of the Scheduler; started once the four serve (docs/gateway.md).
GATEWAY = "gateway"
# The Drafter's replicas beyond the first are "drafter-2", "drafter-3", … (`Stack.drafters`).
DRAFTER_REPLICA_PREFIX = "drafter-"
# Engine threads of each Drafter replica when several share the machine: two replicas each spinning on every
# core wait on each other at every decoding step (docs/deploy.md#load-balancing). An explicit
# DELIBERATE_ENGINE_THREADS in the environment wins.
REPLICA_ENGINE_THREADS = "1"
# `deliberate up`'s replica ports: the first Drafter's gRPC and metrics ports plus this, times the replica's number - 1.
REPLICA_PORT_STEP = 10


@dataclass
class Ports:
    scheduler: int = SCHEDULER_PORTS.grpc
    drafter: int = DRAFTER_PORTS.grpc
    verifier: int = VERIFIER_PORTS.grpc
    refiner: int = REFINER_PORTS.grpc
    verifier_http: int = VERIFIER_PORTS.http
    # Prometheus GET /metrics of each service.
    scheduler_metrics: int = SCHEDULER_PORTS.metrics
    drafter_metrics: int = DRAFTER_PORTS.metrics
    verifier_metrics: int = VERIFIER_PORTS.metrics
    refiner_metrics: int = REFINER_PORTS.metrics
    # The OpenAI-compatible gateway (HTTP).
    gateway: int = GATEWAY_PORT
    # The risk-model service and its /metrics.
    risk: int = RISK_PORTS.grpc
    risk_metrics: int = RISK_PORTS.metrics

    @classmethod
    def free(cls) -> Ports:
        import socket

        sockets = [socket.socket() for _ in fields(cls)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        numbers = [s.getsockname()[1] for s in sockets]
        for s in sockets:
            s.close()
        return cls(*numbers)


@dataclass(frozen=True)
class TlsFiles:
    """The PEM files of an mTLS stack, as deploy/dev-certs.sh names them: every service serves `cert` and demands
    a client certificate `ca` signed; the Scheduler, the gateway and the stack's own probes present `client_cert`."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def in_dir(cls, directory: Path) -> TlsFiles:
        return cls(*(directory / name for name in ("ca.pem", "server.pem", "server-key.pem", "client.pem",
                                                   "client-key.pem")))  # fmt: skip

    def serving(self) -> dict[str, str]:
        return {"tls_cert_file": str(self.cert), "tls_key_file": str(self.key), "tls_client_ca_file": str(self.ca)}

    def calling(self) -> dict[str, str]:
        return {
            "downstream_tls_ca_file": str(self.ca),
            "downstream_tls_cert_file": str(self.client_cert),
            "downstream_tls_key_file": str(self.client_key),
        }

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            self.ca.read_bytes(), self.client_key.read_bytes(), self.client_cert.read_bytes()
        )

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca)
        context.load_cert_chain(self.client_cert, self.client_key)
        return context


@dataclass
class Stack:
    """Risk, drafter, refiner and scheduler are started here; the verifier is started and supervised by the
    scheduler (its `process` restarter), so the scheduler's watchdog can restart it — still separate processes.
    The gateway (`with_gateway`) is a fifth, started once the Scheduler serves."""

    ports: Ports = field(default_factory=Ports)
    host: str = "127.0.0.1"
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    state_dir: Path = Path(".deliberate")
    scheduler_args: list[str] = field(default_factory=list)
    # Flags for the Verifier beyond its wiring, e.g. ["--workers", "2"]; also in the Scheduler's --verifier-command.
    verifier_args: list[str] = field(default_factory=list)
    # "redis": the Schedulers share their learned state in `redis`, a local redis-server that `up` starts (data in
    # state_dir/redis) and `down` stops unless the caller gave one; "file": each keeps it in a file under state_dir.
    state: str = "file"
    redis: LocalRedis | None = None
    owns_redis: bool = field(default=False, init=False)
    exits_on_sigterm: bool = field(default=False, init=False)  # __enter__ set SIGTERM to raise SystemExit
    with_gateway: bool = True
    # Every process appends its spans here (the `file` exporter; `deliberate traces --file` reads them).
    trace_file: Path | None = None
    # Every service serves mTLS with these (the gateway HTTPS); None: plain text.
    tls: TlsFiles | None = None
    # The Scheduler's --auth-tokens-file: its clients need a bearer token (docs/security.md).
    auth_tokens_file: Path | None = None
    # Drafter replicas: the first on ports.drafter, the others ("drafter-2", …) on `drafter_ports` (gRPC, metrics)
    # — free loopback ports when not given. With more than one, the Scheduler's --drafter-address lists them all
    # (round_robin with health checking, core/balancing.py) and each runs DELIBERATE_ENGINE_THREADS=1.
    drafters: int = 1
    # Variables for every Drafter replica only, over `env` (e.g. one engine thread for a single Drafter too).
    drafter_env: dict[str, str] = field(default_factory=dict)
    # Variables for the Refiner only, over `env` (e.g. its own DELIBERATE_MODEL: drafts of one model, the final
    # answer of another).
    refiner_env: dict[str, str] = field(default_factory=dict)
    drafter_ports: list[tuple[int, int]] = field(default_factory=list)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.drafters < 1:
            raise ValueError(f"drafters must be at least 1, not {self.drafters}")
        missing = self.drafters - 1 - len(self.drafter_ports)
        if missing > 0:
            self.drafter_ports = [*self.drafter_ports, *free_port_pairs(missing)]

    @property
    def drafter_replicas(self) -> list[str]:
        """The Drafter replicas' service names: "drafter", then "drafter-2", …"""
        return ["drafter", *(f"{DRAFTER_REPLICA_PREFIX}{i}" for i in range(2, self.drafters + 1))]

    def services(self) -> tuple[str, ...]:
        """SERVICES with every Drafter replica in the Drafter's place."""
        return tuple(
            name for service in SERVICES for name in (self.drafter_replicas if service == "drafter" else [service])
        )

    def _ports_of(self, service: str) -> tuple[int, int | None]:
        """(gRPC port, metrics port) of a service or Drafter replica (the gateway: no metrics port)."""
        if service.startswith(DRAFTER_REPLICA_PREFIX):
            return self.drafter_ports[int(service.removeprefix(DRAFTER_REPLICA_PREFIX)) - 2]
        return getattr(self.ports, service), getattr(self.ports, f"{service}_metrics", None)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.ports.scheduler}"

    def address_of(self, service: str) -> str:
        return f"{self.host}:{self._ports_of(service)[0]}"

    @property
    def drafter_address(self) -> str:
        """The Scheduler's --drafter-address: the one Drafter, or every replica as a list."""
        return ",".join(self.address_of(name) for name in self.drafter_replicas)

    def metrics_url(self, service: str) -> str:
        return f"http://{self.host}:{self._ports_of(service)[1]}/metrics"

    @property
    def gateway_url(self) -> str:
        """The OpenAI-compatible gateway's base URL (OpenAI's SDKs take `{gateway_url}/v1`)."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.ports.gateway}"

    def client_env(self) -> dict[str, str]:
        """Where a client finds this stack: `DELIBERATE_ADDRESS`, the Scheduler's host:port, and
        `DELIBERATE_GATEWAY_URL`, the gateway's base URL (when it runs)."""
        env = {"DELIBERATE_ADDRESS": self.address}
        if self.with_gateway:
            env["DELIBERATE_GATEWAY_URL"] = self.gateway_url
        if self.tls:
            env |= {
                "DELIBERATE_CLIENT_TLS_CA_FILE": str(self.tls.ca),
                "DELIBERATE_CLIENT_TLS_CERT_FILE": str(self.tls.client_cert),
                "DELIBERATE_CLIENT_TLS_KEY_FILE": str(self.tls.client_key),
            }
        return env

    def wiring(self, service: str) -> dict[str, str]:
        """The settings (field name -> value) that put `service` on its port and connect it to the others.

        `command` passes them as flags; the container test passes them as DELIBERATE_* variables.
        """
        p = self.ports
        port, metrics_port = self._ports_of(service)
        settings = {"host": self.host, "port": str(port)}
        if metrics_port is not None:  # the gateway serves no /metrics of its own (yet)
            settings["metrics_port"] = str(metrics_port)
        if service == "verifier":
            settings["http_port"] = str(p.verifier_http)
            settings["risk_address"] = self.address_of("risk")
        if service == "scheduler":
            settings |= {
                "drafter_address": self.drafter_address,
                "verifier_address": self.address_of("verifier"),
                "refiner_address": self.address_of("refiner"),
                "verifier_health_url": f"http://{self.host}:{p.verifier_http}/health",
            }
            if self.redis is not None:
                settings["state_url"] = self.redis.url
        if service == GATEWAY:
            settings["scheduler_address"] = self.address
        if self.tls:
            settings |= self.tls.serving()
            if service in ("scheduler", "verifier", GATEWAY):
                settings |= self.tls.calling()
        if service == "scheduler" and self.auth_tokens_file:
            settings["auth_tokens_file"] = str(self.auth_tokens_file)
        return settings

    def command(self, service: str) -> list[str]:
        module = "drafter" if service.startswith(DRAFTER_REPLICA_PREFIX) else service
        args = [sys.executable, "-m", f"deliberate.{module}"]
        for name, value in self.wiring(service).items():
            args += [flag_name(name), value]
        if service == "verifier":
            args += self.verifier_args
        if service == "scheduler":
            verifier = shlex.join(dying_with_parent(self.command("verifier")))  # ends with the Scheduler that starts it
            args += [
                "--restarter", "process",
                "--verifier-command", verifier,
                "--weights-path", str(self.state_dir / f"scheduler-state-{self.ports.scheduler}.json"),
                *self.scheduler_args,
            ]  # fmt: skip
        return args

    def start(self, service: str) -> subprocess.Popen:
        output = subprocess.DEVNULL
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            output = open(self.log_dir / f"{service}.log", "ab")  # noqa: SIM115 (closed below; the child keeps its copy)
        # Own session: a Ctrl-C in the terminal reaches only the launcher, which then drains each service once.
        # Spawned to end with the launcher too, however it ends (parent_death.py): none keeps its ports.
        try:
            process = spawn(
                self.command(service),
                env=self.service_env(service),
                stdout=output,
                stderr=output,
                start_new_session=True,
            )
        finally:
            if output is not subprocess.DEVNULL:
                output.close()  # a supervisor restarts services many times: no descriptor per start
        self.processes[service] = process
        return process

    def replica_env(self, service: str) -> dict[str, str]:
        """Defaults for a Drafter replica among several (the environment and `env` override them)."""
        if self.drafters > 1 and service in self.drafter_replicas:
            return {"DELIBERATE_ENGINE_THREADS": REPLICA_ENGINE_THREADS}
        return {}

    def service_env(self, service: str) -> dict[str, str]:
        """The service process's whole environment, each part overriding the ones before: replica defaults, the
        inherited environment, `env`, `drafter_env` (a Drafter replica) or `refiner_env`, the trace export."""
        own = self.drafter_env if service in self.drafter_replicas else self.refiner_env if service == "refiner" else {}
        return {**self.replica_env(service), **os.environ, **self.env, **own, **self.trace_env()}

    def trace_env(self) -> dict[str, str]:
        """With a trace file, the variables that make a service export its spans there (the Scheduler passes
        them on to the Verifier it starts)."""
        if self.trace_file is None:
            return {}
        return {"DELIBERATE_TRACE_EXPORTER": "file", "DELIBERATE_TRACE_FILE": str(self.trace_file.resolve())}

    def up(self, timeout_s: float = 300.0) -> None:
        self.start_state_store()
        for service in self.services():
            if service != "verifier":  # the scheduler starts it
                self.start(service)
        self.wait_healthy(timeout_s)
        if self.with_gateway:
            self.start(GATEWAY)
            self.wait_healthy(timeout_s, services=(GATEWAY,))

    def start_state_store(self) -> None:
        """With state "redis" and no Redis given, a local redis-server (data in state_dir/redis) for the Scheduler."""
        if self.state not in ("file", "redis"):
            raise ValueError(f"state must be file or redis, not {self.state!r}")
        if self.state == "redis" and self.redis is None:
            self.redis = LocalRedis(self.state_dir / "redis").start()
            self.owns_redis = True

    def wait_healthy(self, timeout_s: float, services: tuple[str, ...] | None = None) -> None:
        """Waits until each of `services` (default: every service and Drafter replica) reports SERVING."""
        deadline = time.monotonic() + timeout_s
        for service in self.services() if services is None else services:
            while not self.is_serving(service):
                process = self.processes.get(service)
                if process is not None and process.poll() is not None:
                    raise RuntimeError(f"{service} exited with code {process.returncode}{self.log_hint(service)}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{service} not SERVING after {timeout_s:.0f}s{self.log_hint(service)}")
                time.sleep(0.25)

    def log_hint(self, service: str) -> str:
        return f"; see {self.log_dir / (service + '.log')}" if self.log_dir else ""

    def is_serving(self, service: str) -> bool:
        if service == GATEWAY:
            try:
                context = self.tls.ssl_context() if self.tls else None
                with urllib.request.urlopen(f"{self.gateway_url}/health", timeout=1.0, context=context) as reply:
                    return reply.status == 200
            except (urllib.error.URLError, OSError):
                return False
        with self.channel(service) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
            except grpc.RpcError:
                return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def verifier_pid(self) -> int | None:
        """The pid of the Verifier the Scheduler started (found by its port in /proc; Linux), None if none runs."""
        wanted = f"--port\x00{self.ports.verifier}\x00"
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes().decode()
                except OSError:
                    continue
                if "deliberate.verifier" in cmdline and wanted in cmdline:
                    return int(entry.name)
        return None

    def channel(self, service: str) -> grpc.Channel:
        """A channel to `service` as the stack's own clients call it (with the client certificate under TLS)."""
        if self.tls is None:
            return grpc.insecure_channel(self.address_of(service))
        return grpc.secure_channel(self.address_of(service), self.tls.channel_credentials())

    def down(self, timeout_s: float = 15.0) -> dict[str, int]:
        """SIGTERM every process (graceful drain), SIGKILL what is still alive after `timeout_s`."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = {}
        for service, process in self.processes.items():
            try:
                codes[service] = process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[service] = process.wait()
        if self.owns_redis and self.redis is not None:
            codes["redis"] = self.redis.stop()
        return codes

    def __enter__(self) -> Stack:
        self.exits_on_sigterm = self._exit_on_sigterm()
        try:
            self.up()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.down()
        finally:
            if self.exits_on_sigterm:  # the process's SIGTERM as it was before the stack: its default
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                self.exits_on_sigterm = False

    @staticmethod
    def _exit_on_sigterm() -> bool:
        """A SIGTERM's default kills the process where it stands and leaves the services running; as SystemExit it
        unwinds through `__exit__`, which stops them. Only where nothing else handles SIGTERM (main thread only);
        whether it was set."""
        handled = signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        if handled or threading.current_thread() is not threading.main_thread():
            return False
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        return True


def free_port_pairs(count: int) -> list[tuple[int, int]]:
    """`count` (gRPC, metrics) pairs of free loopback ports."""
    import socket

    sockets = [socket.socket() for _ in range(2 * count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    numbers = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return list(zip(numbers[::2], numbers[1::2], strict=True))
