"""The Verifier's request limits, declared once (core/limits.py): enforced by its edge, written into the protos.

The constraints' limits (how many, CEL and JSON Schema sizes, the context's size) are checked where they are
compiled (constraints.py), since `CheckConstraints` and `VerifyDrafts` both compile them.
"""

from __future__ import annotations

from deliberate_api.verifier.v1 import verifier_service_pb2

from ..core.limits import Count, MessageLimits, Setting, Text
from .settings import VerifierSettings

VERIFY_DRAFTS = MessageLimits(
    verifier_service_pb2.VerifyDraftsRequest,
    VerifierSettings,
    {
        "prompt": Text(Setting("max_prompt_chars"), required=True),
        "drafts": Count(1, Setting("max_drafts")),
        "drafts[].text": Text(Setting("max_draft_chars")),
    },
)
