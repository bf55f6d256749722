"""Shared by the gRPC edges: the INVALID_ARGUMENT error, sampling overrides, output schemas. The field limits
themselves are declared in each service's limits.py and checked by core/limits.py."""

from __future__ import annotations

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2

from .schemas import check_schema

# The ways to the final text by the names the flags, the gateway and the lab use (SolveRequest.final_text).
FINAL_TEXTS = {
    "pass_through": scheduler_service_pb2.FINAL_TEXT_PASS_THROUGH,
    "refine": scheduler_service_pb2.FINAL_TEXT_REFINE,
    "prefix": scheduler_service_pb2.FINAL_TEXT_CONSENSUS_PREFIX,
}


class InvalidArgument(ValueError):
    """A request field breaks a documented limit; the edge answers INVALID_ARGUMENT with `str(self)`."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field


def sampling_overrides(proto: common_pb2.SamplingParams) -> dict[str, float | int]:
    """The sampling fields set in `proto`, by name (their ranges were checked at the edge: SAMPLING); an
    engine-backed service applies them to its defaults (`EngineServicer.sampling`)."""
    names = ("temperature", "top_p", "max_new_tokens", "presence_penalty", "frequency_penalty", "seed")
    return {name: getattr(proto, name) for name in names if proto.HasField(name)}


def parse_output_schema(text: str, field: str = "output_schema") -> dict | None:
    """Empty means free text; otherwise the text must be a valid JSON Schema (checked against its metaschema)."""
    if not text.strip():
        return None
    try:
        return check_schema(text)
    except ValueError as error:
        raise InvalidArgument(field, str(error)) from None
