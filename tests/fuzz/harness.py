"""What every fuzz case must end in, and the in-process harness that calls a servicer the way grpc.aio does.

A case ends in OK, INVALID_ARGUMENT whose message begins with a field of the request (`prompt: …`,
`constraints[0].cel_expression: …`, `context: …`; `request: …` is the edge's own, for bytes that do not parse),
DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED. Anything else (UNKNOWN, INTERNAL, an exception escaping the servicer,
a crash, a hang) is a bug in the service.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

import grpc
from google.protobuf.message import Message
from hypothesis import HealthCheck, settings

from deliberate.core import admission
from deliberate.core.admission import message_name

# `make test` runs the small, derandomized profile; `make fuzz` the full one (HYPOTHESIS_PROFILE=full).
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# Longest a case may take: a validation or a verification costs milliseconds; past this it counts as a hang.
CASE_LIMIT_S = 10.0
COMMON = dict(
    deadline=timedelta(seconds=CASE_LIMIT_S),
    # Requests are large on purpose (drafts near their character limit, deep contexts).
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    print_blob=True,
)
settings.register_profile("ci", derandomize=True, database=None, **COMMON)
settings.register_profile("full", **COMMON)

ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
# `constraints[3].cel_expression: …`: a field path, then the problem.
FIELD_PATH = re.compile(r"^([a-z_]+)(\[\d+\])?(\.[a-z_]+(\[\d+\])?)*: ")


def fuzz_settings(*, ci: int, full: int, **overrides) -> settings:
    """The active profile with this target's share of examples."""
    return settings(settings.get_profile(PROFILE), max_examples=full if PROFILE == "full" else ci, **overrides)


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str = ""


class Aborted(Exception):
    """What `context.abort` raises, as grpc.aio's does: the handler stops there."""


class RecordingContext:
    """The servicer context of an in-process call: records the status a handler aborts with."""

    def __init__(self):
        self.outcome: Outcome | None = None

    async def abort(self, code, details="", trailing_metadata=()):
        self.outcome = Outcome(code, details)
        raise Aborted(details)

    def time_remaining(self):
        return None


async def call_in_process(handler, request: Message) -> Outcome:
    """Calls `handler` with `request` as the server's edge passes it on: serialized and parsed again by the
    admission interceptor (which refuses, e.g., nesting past protobuf's depth limit). An exception that escapes
    the handler propagates (on a real server: UNKNOWN)."""
    context = RecordingContext()
    deserialize = type(request).FromString
    try:
        parsed = await admission.parse(request.SerializeToString(), deserialize, message_name(deserialize), context)
        await handler(parsed, context)
    except Aborted:
        return context.outcome
    return Outcome(grpc.StatusCode.OK)


def run(coroutine, limit_s: float = CASE_LIMIT_S):
    """Runs one case on a fresh event loop, bounded in time (a case past the bound fails as a hang)."""
    return asyncio.run(asyncio.wait_for(coroutine, limit_s))


def check_outcome(outcome: Outcome, request: Message) -> None:
    """The property: an allowed status, and an INVALID_ARGUMENT that names a field of `request`."""
    assert outcome.code in ALLOWED, f"{outcome.code.name}: {outcome.details}"
    if outcome.code == grpc.StatusCode.INVALID_ARGUMENT:
        match = FIELD_PATH.match(outcome.details)
        assert match, f"INVALID_ARGUMENT names no field: {outcome.details!r}"
        root = match.group(1)
        assert root == "request" or root in request.DESCRIPTOR.fields_by_name, f"not a field: {outcome.details!r}"


class Tally:
    """Statuses seen per fuzz target, printed at the end of the session (`pytest -s`) for docs/reliability.md."""

    seen: dict[str, Counter] = {}

    @classmethod
    def add(cls, target: str, outcome: Outcome) -> None:
        cls.seen.setdefault(target, Counter())[outcome.code.name] += 1
