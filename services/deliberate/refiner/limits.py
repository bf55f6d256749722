"""The Refiner's request limits, declared once (core/limits.py): enforced by its edge, written into the protos."""

from __future__ import annotations

from deliberate_api.refiner.v1 import refiner_service_pb2

from ..core.limits import SAMPLING, Count, MessageLimits, Setting, Text, nested
from .settings import RefinerSettings

REFINE = MessageLimits(
    refiner_service_pb2.RefineRequest,
    RefinerSettings,
    {
        "prompt": Text(Setting("max_prompt_chars"), required=True),
        "selected": Count(1, Setting("max_selected")),
        "selected[].draft.text": Text(Setting("max_draft_chars")),
        "consensus_prefix": Text(Setting("max_draft_chars")),
        **nested("sampling", SAMPLING),
    },
)
