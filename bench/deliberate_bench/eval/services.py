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
    """Stubs of the Scheduler, Drafter and Refiner, and of a Refiner on the other model (--cross-refiner-model)."""

    def __init__(self, scheduler: str, drafter: str, refiner: str, cross_refiner: str | None = None):
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        addresses = [scheduler, drafter, refiner] + ([cross_refiner] if cross_refiner else [])
        self.channels = [grpc.insecure_channel(a, options=options) for a in addresses]
        self.scheduler = scheduler_service_pb2_grpc.SchedulerServiceStub(self.channels[0])
        self.drafter = drafter_service_pb2_grpc.DrafterServiceStub(self.channels[1])
        self.refiner = refiner_service_pb2_grpc.RefinerServiceStub(self.channels[2])
        self.cross_refiner = refiner_service_pb2_grpc.RefinerServiceStub(self.channels[3]) if cross_refiner else None

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


def error_text(error: grpc.RpcError) -> str:
    return f"{error.code().name}: {error.details()}"


def engine_and_model() -> tuple[str, str]:
    """What DELIBERATE_ENGINE / DELIBERATE_MODEL select (the services read the same variables)."""
    try:
        from deliberate.core.config import parse_settings
        from deliberate.engines.settings import EngineSettings

        settings = parse_settings(EngineSettings, [])
        return settings.engine, settings.model
    except Exception:  # the server package may be absent where only the client is installed
        return os.environ.get("DELIBERATE_ENGINE", "unknown"), os.environ.get("DELIBERATE_MODEL", "unknown")


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


def started_refiner(log_dir: Path, model: str) -> Stack | None:
    """A Refiner alone on `model` (free ports, logs in log_dir/cross-refiner/), up; None (said why) when not."""
    refiner = Stack(ports=Ports.free(), env={"DELIBERATE_MODEL": model}, log_dir=log_dir / "cross-refiner")
    print(f"starting a second Refiner on {model} …", file=sys.stderr)
    try:
        refiner.start("refiner")
        refiner.wait_healthy(600, services=("refiner",))
    except (RuntimeError, TimeoutError, KeyboardInterrupt) as error:
        print(f"error: {error or 'interrupted'}", file=sys.stderr)
        refiner.down()
        return None
    return refiner
