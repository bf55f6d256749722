"""The declared limits at every server edge, through the real processes: each service answers a request that
breaks one with INVALID_ARGUMENT whose message begins with the concrete field path (the Scheduler's own are in
test_pipeline.py)."""

from __future__ import annotations

import grpc
import pytest

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

LONG_DRAFT = common_pb2.Draft(id="d", text="x" * 32_001)
NO_TOP_P = common_pb2.SamplingParams(top_p=0)
CASES = {
    "drafter num_drafts": (
        "drafter",
        drafter_service_pb2.GenerateDraftsRequest(prompt="q", num_drafts=99),
        "num_drafts: must be in [1, 8], got 99",
    ),
    "drafter strategies[1]": (
        "drafter",
        drafter_service_pb2.GenerateDraftsRequest(prompt="q", num_drafts=2, strategies=["ok", "h" * 501]),
        "strategies[1]: has 501 characters; the limit is 500",
    ),
    "drafter sampling.top_p": (
        "drafter",
        drafter_service_pb2.GenerateDraftsRequest(
            prompt="q", num_drafts=1, sampling=common_pb2.SamplingParams(top_p=0)
        ),
        "sampling.top_p: must be in [0.01, 1.0], got 0.0",
    ),
    "verifier drafts": (
        "verifier",
        verifier_service_pb2.VerifyDraftsRequest(prompt="q"),
        "drafts: must not be empty",
    ),
    "verifier prompt": (
        "verifier",
        verifier_service_pb2.VerifyDraftsRequest(prompt=" ", drafts=[common_pb2.Draft(text="4")]),
        "prompt: must not be empty",
    ),
    "verifier CheckConstraints constraints[0].cel_expression": (
        "verifier",
        verifier_service_pb2.CheckConstraintsRequest(constraints=[common_pb2.Constraint(cel_expression="1" * 2049)]),
        "constraints[0].cel_expression: has 2049 characters; the limit is 2048",
    ),
    "refiner selected[0].draft.text": (
        "refiner",
        refiner_service_pb2.RefineRequest(prompt="q", selected=[refiner_service_pb2.VerifiedDraft(draft=LONG_DRAFT)]),
        "selected[0].draft.text: has 32001 characters; the limit is 32000",
    ),
}


def call(service: str, address: str, request):
    with grpc.insecure_channel(address) as channel:
        if service == "drafter":
            return list(drafter_service_pb2_grpc.DrafterServiceStub(channel).GenerateDrafts(request, timeout=30))
        if isinstance(request, verifier_service_pb2.CheckConstraintsRequest):
            return verifier_service_pb2_grpc.VerifierServiceStub(channel).CheckConstraints(request, timeout=30)
        if service == "verifier":
            return verifier_service_pb2_grpc.VerifierServiceStub(channel).VerifyDrafts(request, timeout=30)
        return list(refiner_service_pb2_grpc.RefinerServiceStub(channel).Refine(request, timeout=30))


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_edge_refuses_a_broken_limit_naming_the_field(stack, case):
    service, request, message = CASES[case]
    with pytest.raises(grpc.RpcError) as raised:
        call(service, stack.address_of(service), request)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == message
