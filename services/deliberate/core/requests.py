"""Validation shared by the gRPC edges: limits, sampling ranges, and clear INVALID_ARGUMENT messages."""

from __future__ import annotations

from deliberate.common.v1 import common_pb2

from .schemas import check_schema


class InvalidArgument(ValueError):
    """A request field breaks a documented limit; the edge answers INVALID_ARGUMENT with `str(self)`."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field


def require_text(field: str, value: str, max_chars: int) -> None:
    if not value.strip():
        raise InvalidArgument(field, "must not be empty")
    if len(value) > max_chars:
        raise InvalidArgument(field, f"has {len(value)} characters; the limit is {max_chars}")


def require_range(field: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise InvalidArgument(field, f"must be in [{low}, {high}], got {value}")


def sampling_overrides(
    proto: common_pb2.SamplingParams,
    max_new_tokens_limit: int,
    field: str = "sampling",
) -> dict[str, float | int]:
    """The sampling fields set in `proto`, by name, each checked against its range; an engine-backed service
    applies them to its defaults (`EngineServicer.sampling`)."""
    overrides: dict[str, float | int] = {}
    ranges = {
        "temperature": (0.0, 2.0),
        "top_p": (0.01, 1.0),
        "max_new_tokens": (1, max_new_tokens_limit),
        "presence_penalty": (-2.0, 2.0),
        "frequency_penalty": (-2.0, 2.0),
    }
    for name, (low, high) in ranges.items():
        if proto.HasField(name):
            value = getattr(proto, name)
            require_range(f"{field}.{name}", value, low, high)
            overrides[name] = value
    if proto.HasField("seed"):
        overrides["seed"] = proto.seed
    return overrides


def parse_output_schema(text: str, field: str = "output_schema") -> dict | None:
    """Empty means free text; otherwise the text must be a valid JSON Schema (checked against its metaschema)."""
    if not text.strip():
        return None
    try:
        return check_schema(text)
    except ValueError as error:
        raise InvalidArgument(field, str(error)) from None
