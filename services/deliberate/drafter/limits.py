"""The Drafter's request limits, declared once (core/limits.py): enforced by its edge, written into the protos."""

from __future__ import annotations

from deliberate_api.drafter.v1 import drafter_service_pb2

from ..core.limits import (
    MAX_CONSTRAINTS,
    MAX_DECISION_DATA_BYTES,
    MAX_RULE_PACK_NAME_CHARS,
    SAMPLING,
    Count,
    JsonObject,
    MessageLimits,
    Range,
    Setting,
    Text,
    nested,
)
from ..core.requests import InvalidArgument
from .settings import DrafterSettings

# A replacement draft continues a round's numbering; a round never starts more than this many drafts.
MAX_FIRST_INDEX = 64


class GenerateDraftsLimits(MessageLimits):
    """The declared limits, then the one that compares fields: no more programs than drafts."""

    def check(self, request, settings) -> None:
        super().check(request, settings)
        if request.program_drafts > request.num_drafts:
            raise InvalidArgument(
                "program_drafts", f"must be at most num_drafts ({request.num_drafts}), got {request.program_drafts}"
            )


GENERATE_DRAFTS = GenerateDraftsLimits(
    drafter_service_pb2.GenerateDraftsRequest,
    DrafterSettings,
    {
        "prompt": Text(Setting("max_prompt_chars"), required=True),
        "num_drafts": Range(1, Setting("max_drafts")),
        "strategies": Count(0, Setting("max_drafts")),
        "strategies[]": Text(Setting("max_hint_chars")),
        "feedback": Text(Setting("max_prompt_chars")),
        "first_index": Range(0, MAX_FIRST_INDEX),
        "program_drafts": Range(0, Setting("max_drafts")),
        "context": JsonObject(MAX_DECISION_DATA_BYTES),
        "rule_packs": Count(0, MAX_CONSTRAINTS),
        "rule_packs[]": Text(MAX_RULE_PACK_NAME_CHARS),
        **nested("sampling", SAMPLING),
    },
)
