"""The Drafter process on its default engine (llama.cpp, the small test model): drafts that carry an output
schema are decoded under it, so every draft that stopped by itself parses and satisfies the schema."""

from __future__ import annotations

import json

import grpc
import jsonschema
import pytest

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc

pytestmark = pytest.mark.model

SCHEMA = {
    "type": "object",
    "properties": {"total_clips": {"type": "integer"}, "explanation": {"type": "string", "maxLength": 80}},
    "required": ["total_clips", "explanation"],
    "additionalProperties": False,
}


def test_structured_drafts_are_constrained_to_the_schema(stack):
    request = drafter_service_pb2.GenerateDraftsRequest(
        request_id="constrained-drafts",
        prompt="Natalia sold 48 clips in April and half as many in May. How many clips did she sell in all?",
        num_drafts=3,
        output_schema=json.dumps(SCHEMA),
        sampling=common_pb2.SamplingParams(max_new_tokens=120, seed=7),
    )
    with grpc.insecure_channel(stack.address_of("drafter")) as channel:
        drafts = [
            r.draft for r in drafter_service_pb2_grpc.DrafterServiceStub(channel).GenerateDrafts(request, timeout=180)
        ]
    assert sorted(d.index for d in drafts) == [0, 1, 2]
    stopped = [d for d in drafts if d.finish_reason == common_pb2.FINISH_REASON_STOP]
    assert stopped, "at least one of three short JSON drafts ends by itself"
    for draft in stopped:
        jsonschema.validate(json.loads(draft.text), SCHEMA)
    assert len({d.text for d in drafts}) == 3  # each draft has its own seed
