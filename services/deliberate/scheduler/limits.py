"""The Scheduler's request limits, declared once (core/limits.py): enforced by its edge before any stage runs,
written into the protos and docs/limits.md's table."""

from __future__ import annotations

from deliberate_api.scheduler.v1 import scheduler_service_pb2

from ..core.limits import (
    CONSTRAINTS,
    MAX_DECISION_DATA_BYTES,
    SAMPLING,
    Count,
    MessageLimits,
    OneOf,
    Range,
    Setting,
    Text,
    nested,
)
from ..core.requests import InvalidArgument
from ..selection import POLICIES
from .decisions import decision_data_bytes
from .round_options import grouped_field, round_options
from .settings import SchedulerSettings

# Request ids become log fields, span attributes and draft ids.
MAX_REQUEST_ID_CHARS = 128


class SolveLimits(MessageLimits):
    """The declared limits, then the ones that compare fields: no more programs than the drafts asked for (with
    num_drafts 0 the Scheduler chooses N and uses at most N programs), and for decision programs (programs of a
    request with an output schema) no more data than their sandbox takes."""

    def check(self, request, settings) -> None:
        super().check(request, settings)
        options = round_options(request)  # flat or grouped, as the plan reads them
        if options.HasField("program_drafts") and 0 < options.max_drafts < options.program_drafts:
            most = "round.max_drafts" if request.round.max_drafts else "num_drafts"
            raise InvalidArgument(
                grouped_field(request, "program_drafts", "program_drafts"),
                f"must be at most {most} ({options.max_drafts}), got {options.program_drafts}",
            )
        if options.program_drafts and request.output_schema.strip():
            size = decision_data_bytes(request)
            if size > MAX_DECISION_DATA_BYTES:
                raise InvalidArgument(
                    "context",
                    f"decision programs (program_drafts > 0 with an output_schema) read at most "
                    f"{MAX_DECISION_DATA_BYTES} bytes of data; this request's context and rule-pack data have {size}",
                )


SOLVE = SolveLimits(
    scheduler_service_pb2.SolveRequest,
    SchedulerSettings,
    {
        "prompt": Text(Setting("max_prompt_chars"), required=True),
        "num_drafts": Range(0, Setting("max_drafts")),
        "quorum": Range(0, Setting("max_drafts")),
        "strategy_hints": Count(0, Setting("max_drafts")),
        "strategy_hints[]": Text(Setting("max_hint_chars")),
        "request_id": Text(MAX_REQUEST_ID_CHARS),
        "selection_policy": OneOf(lambda: sorted(POLICIES), "the registered selection policies"),
        "program_drafts": Range(0, Setting("max_drafts")),
        "round.max_drafts": Range(0, Setting("max_drafts")),
        "round.program_drafts": Range(0, Setting("max_drafts")),
        "round.quorum": Range(0, Setting("max_drafts")),
        "round.selection_policy": OneOf(lambda: sorted(POLICIES), "the registered selection policies"),
        **nested("sampling", SAMPLING),
        **nested("refine_sampling", SAMPLING),
        **CONSTRAINTS,
    },
)
