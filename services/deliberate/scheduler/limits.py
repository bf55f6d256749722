"""The Scheduler's request limits, declared once (core/limits.py): enforced by its edge before any stage runs,
written into the protos and the README's limits table."""

from __future__ import annotations

from deliberate_api.scheduler.v1 import scheduler_service_pb2

from ..core.limits import CONSTRAINTS, SAMPLING, Count, MessageLimits, OneOf, Range, Setting, Text, nested
from ..selection import POLICIES
from .settings import SchedulerSettings

# Request ids become log fields, span attributes and draft ids.
MAX_REQUEST_ID_CHARS = 128

SOLVE = MessageLimits(
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
        **nested("sampling", SAMPLING),
        **nested("refine_sampling", SAMPLING),
        **CONSTRAINTS,
    },
)
