"""Small conversions between domain values and protobuf messages, shared by the services."""

from __future__ import annotations

from google.protobuf import duration_pb2

from deliberate.common.v1 import common_pb2

FINISH_REASONS = {
    "stop": common_pb2.FINISH_REASON_STOP,
    "length": common_pb2.FINISH_REASON_LENGTH,
    "aborted": common_pb2.FINISH_REASON_ABORTED,
}

FINISH_REASON_NAMES = {value: name for name, value in FINISH_REASONS.items()}


def duration(seconds: float) -> duration_pb2.Duration:
    value = duration_pb2.Duration()
    value.FromNanoseconds(int(seconds * 1e9))
    return value
