"""The local stack an evaluation starts (or the services it is pointed at), and stubs to call them."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import grpc

from deliberate.cli.stack import Ports, Stack
from deliberate_api.drafter.v1 import drafter_service_pb2_grpc
from deliberate_api.refiner.v1 import refiner_service_pb2_grpc
from deliberate_api.scheduler.v1 import scheduler_service_pb2_grpc


class Services:
    """Stubs of the Scheduler, Drafter and Refiner, and of a Refiner and a Drafter on another model
    (--cross-refiner-model, --cross-drafter-model)."""

    def __init__(
        self,
        scheduler: str,
        drafter: str,
        refiner: str,
        cross_refiner: str | None = None,
        cross_drafter: str | None = None,
    ):
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        self.channels = [grpc.insecure_channel(a, options=options) for a in (scheduler, drafter, refiner)]
        self.scheduler = scheduler_service_pb2_grpc.SchedulerServiceStub(self.channels[0])
        self.drafter = drafter_service_pb2_grpc.DrafterServiceStub(self.channels[1])
        self.refiner = refiner_service_pb2_grpc.RefinerServiceStub(self.channels[2])
        self.cross_refiner = self._stub(cross_refiner, refiner_service_pb2_grpc.RefinerServiceStub, options)
        self.cross_drafter = self._stub(cross_drafter, drafter_service_pb2_grpc.DrafterServiceStub, options)

    def _stub(self, address: str | None, stub, options):
        if not address:
            return None
        self.channels.append(grpc.insecure_channel(address, options=options))
        return stub(self.channels[-1])

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


def error_text(error: grpc.RpcError) -> str:
    return f"{error.code().name}: {error.details()}"


def engine_and_models() -> tuple[str, str, str]:
    """The engine and the Drafter's and Refiner's models that DELIBERATE_ENGINE / DELIBERATE_MODEL and the services'
    defaults select, `embedded` spelled out (its meaning changed with issue 40)."""
    try:
        from deliberate.core.config import parse_settings
        from deliberate.engines.models import DEFAULT_EMBEDDED
        from deliberate.engines.settings import EngineSettings
        from deliberate.refiner.settings import RefinerSettings

        def spelled(model: str) -> str:
            return DEFAULT_EMBEDDED if model == "embedded" else model

        drafter = parse_settings(EngineSettings, [])
        return drafter.engine, spelled(drafter.model), spelled(parse_settings(RefinerSettings, []).model)
    except Exception:  # the server package may be absent where only the client is installed
        model = os.environ.get("DELIBERATE_MODEL", "unknown")
        return os.environ.get("DELIBERATE_ENGINE", "unknown"), model, model


def deployment(drafter_model: str, refiner_model: str) -> str:
    """The models of a stack in one name: the model, or the Drafter's and the Refiner's when they differ."""
    return drafter_model if refiner_model == drafter_model else f"{drafter_model} (Refiner: {refiner_model})"


def interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def neighbour(address: str, offset: int) -> str:
    host, port = address.rsplit(":", 1)
    return f"{host}:{int(port) + offset}"


def started_stack(log_dir: Path, prefix: str, what: str, **options) -> Stack | None:
    """A local stack, up, with its state in a new temporary folder named `prefix…`; None (said why, stopped) when
    it did not come up. `options`: more of Stack's arguments."""
    stack = Stack(ports=Ports.free(), log_dir=log_dir, state_dir=Path(tempfile.mkdtemp(prefix=prefix)), **options)
    print(f"starting {what}; logs in {log_dir}/ …", file=sys.stderr)
    try:
        stack.up(timeout_s=600)
    except (RuntimeError, TimeoutError, KeyboardInterrupt) as error:
        print(f"error: {error or 'interrupted'}", file=sys.stderr)
        stack.down()
        return None
    return stack


def started_alone(service: str, log_dir: Path, model: str) -> Stack | None:
    """A Drafter or Refiner alone on `model` (free ports, logs in log_dir/cross-<service>/), up; None (said why)
    when not."""
    alone = Stack(ports=Ports.free(), env={"DELIBERATE_MODEL": model}, log_dir=log_dir / f"cross-{service}")
    print(f"starting a second {service} on {model} …", file=sys.stderr)
    try:
        alone.start(service)
        alone.wait_healthy(600, services=(service,))
    except (RuntimeError, TimeoutError, KeyboardInterrupt) as error:
        print(f"error: {error or 'interrupted'}", file=sys.stderr)
        alone.down()
        return None
    return alone
