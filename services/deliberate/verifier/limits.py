"""The Verifier's request limits, declared once (core/limits.py): enforced by its edge, written into the protos.

What needs code stays in constraints.py and is checked right after: JSON Schemas against their metaschema (and
their 64 KiB size), CEL compilation, rule-pack parameters.
"""

from __future__ import annotations

from deliberate_api.verifier.v1 import verifier_service_pb2

from ..core.limits import CONSTRAINTS, Count, MessageLimits, Setting, Text
from .settings import VerifierSettings

VERIFY_DRAFTS = MessageLimits(
    verifier_service_pb2.VerifyDraftsRequest,
    VerifierSettings,
    {
        "prompt": Text(Setting("max_prompt_chars"), required=True),
        "drafts": Count(1, Setting("max_drafts")),
        "drafts[].text": Text(Setting("max_draft_chars")),
        **CONSTRAINTS,
    },
)

# The first message of VerifyStream; the text of each draft is bounded as it grows (--max-draft-chars).
VERIFY_STREAM_START = MessageLimits(
    verifier_service_pb2.VerifyStreamStart,
    VerifierSettings,
    {"prompt": Text(Setting("max_prompt_chars"), required=True), **CONSTRAINTS},
)

CHECK_CONSTRAINTS = MessageLimits(verifier_service_pb2.CheckConstraintsRequest, VerifierSettings, CONSTRAINTS)

# VERIFY_DRAFTS less the constraint fields: checked on every call. The constraint fields are checked with
# CHECK_CONSTRAINTS once per distinct constraint set, when it is compiled (server.py).
VERIFY_DRAFTS_OWN_FIELDS = MessageLimits(
    verifier_service_pb2.VerifyDraftsRequest,
    VerifierSettings,
    {path: rule for path, rule in VERIFY_DRAFTS.fields.items() if path not in CONSTRAINTS},
)
