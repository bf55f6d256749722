"""Small conversions between domain values and protobuf messages, shared by the services."""

from __future__ import annotations

from google.protobuf import duration_pb2

from deliberate_api.common.v1 import common_pb2

FINISH_REASONS = {
    "stop": common_pb2.FINISH_REASON_STOP,
    "length": common_pb2.FINISH_REASON_LENGTH,
    "aborted": common_pb2.FINISH_REASON_ABORTED,
}

FINISH_REASON_NAMES = {value: name for name, value in FINISH_REASONS.items()}


def duration(seconds: float) -> duration_pb2.Duration:
    value = duration_pb2.Duration()
    set_duration(value, seconds)
    return value


def set_duration(target: duration_pb2.Duration, seconds: float) -> None:
    """Sets a Duration field in place: what `target.CopyFrom(duration(seconds))` does, without the copy and, for
    a length of time (never negative), without FromNanoseconds's normalization, which has nothing to do then."""
    nanos = int(seconds * 1e9)
    if nanos < 0:
        target.FromNanoseconds(nanos)
    else:
        target.seconds, target.nanos = divmod(nanos, 1_000_000_000)


def struct_to_dict(struct) -> dict:
    """A google.protobuf.Struct as plain Python, with integral numbers as ints (Struct stores only doubles,
    but ids and counts are integers to the rules that read them)."""
    from google.protobuf import json_format

    return _integral(json_format.MessageToDict(struct))


def _integral(value):
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_integral(v) for v in value]
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    return value


def in_reading_order(data: dict) -> list[tuple[str, object]]:
    """`data`'s entries tables first, then other lists, then the rest, each group by name. The order a client wrote
    is lost in the protobuf Struct the data travels in; a stable one keeps the prompt the same for the same data."""

    def group(entry: tuple[str, object]) -> tuple[int, str]:
        key, value = entry
        if is_table(value):
            return 0, key
        return (1 if isinstance(value, list) else 2 if isinstance(value, dict) else 3), key

    return sorted(data.items(), key=group)


def is_table(value: object) -> bool:
    """A non-empty list of dicts: rows a decision program reads by their keys."""
    return isinstance(value, list) and bool(value) and all(isinstance(row, dict) for row in value)


def field_names(rows: list[dict]) -> list[str]:
    """The keys of a table's rows, `id` first and the rest by name (see `in_reading_order`)."""
    names = sorted({field for row in rows for field in row})
    return sorted(names, key=lambda name: name != "id")
