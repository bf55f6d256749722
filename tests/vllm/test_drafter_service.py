"""The real Drafter process with `--engine vllm`: loads the model, serves drafts over gRPC, drains on SIGTERM."""

from __future__ import annotations

import grpc
import pytest

pytest.importorskip("vllm", reason="vllm is not installed; see docs/vllm.md for its test environment")

from deliberate.cli.stack import Ports, Stack
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc


def test_drafter_serves_drafts_with_the_vllm_engine(model_dir, tmp_path):
    env = {"DELIBERATE_ENGINE": "vllm", "DELIBERATE_MODEL": str(model_dir)}
    stack = Stack(ports=Ports.free(), env=env, log_dir=tmp_path)
    try:
        stack.start("drafter")
        stack.wait_healthy(300, services=("drafter",))
        request = drafter_service_pb2.GenerateDraftsRequest(
            request_id="vllm-1",
            prompt="What is 12 + 30?",
            num_drafts=3,
            sampling=common_pb2.SamplingParams(max_new_tokens=8, seed=5),
        )
        with grpc.insecure_channel(stack.address_of("drafter")) as channel:
            replies = list(drafter_service_pb2_grpc.DrafterServiceStub(channel).GenerateDrafts(request, timeout=120))
    finally:
        codes = stack.down()

    drafts = sorted((reply.draft for reply in replies), key=lambda draft: draft.index)
    assert [draft.id for draft in drafts] == ["vllm-1-r0-d0", "vllm-1-r0-d1", "vllm-1-r0-d2"]
    for draft in drafts:
        assert draft.text.strip()
        assert draft.usage.prompt_tokens > 0
        assert 1 <= draft.usage.completion_tokens <= 8
        assert draft.finish_reason in (common_pb2.FINISH_REASON_STOP, common_pb2.FINISH_REASON_LENGTH)
    assert codes == {"drafter": 0}, f"drafter did not stop cleanly; see {tmp_path / 'drafter.log'}"
