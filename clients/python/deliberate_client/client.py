"""A thin synchronous client over the Scheduler's contract (deliberate.scheduler.v1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
from google.protobuf import json_format, struct_pb2

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.scheduler.v1 import scheduler_service_pb2_grpc


def build_request(
    prompt: str,
    *,
    num_drafts: int = 0,
    max_new_tokens: int | None = None,
    refine_max_new_tokens: int | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    output_schema: str = "",
    context: dict | None = None,
    constraints: list[dict] | None = None,
    strategy_hints: list[str] | None = None,
    request_id: str = "",
    disable_thinking_trace: bool = False,
    disable_default_arithmetic: bool = False,
    selection_policy: str = "",
    program_drafts: int | None = None,
    draft_count: str = "",
) -> pb.SolveRequest:
    """A SolveRequest from plain values. `draft_count`: "cascade", "all_at_once", "adaptive", or "" for the
    Scheduler's."""
    sampling = common_pb2.SamplingParams()
    if max_new_tokens is not None:
        sampling.max_new_tokens = max_new_tokens
    if temperature is not None:
        sampling.temperature = temperature
    if seed is not None:
        sampling.seed = seed
    refine_sampling = common_pb2.SamplingParams()
    if refine_max_new_tokens is not None:
        refine_sampling.max_new_tokens = refine_max_new_tokens
    context_struct = struct_pb2.Struct()
    if context:
        context_struct.update(context)
    return pb.SolveRequest(
        prompt=prompt,
        constraints=[json_format.ParseDict(c, common_pb2.Constraint()) for c in constraints or []],
        num_drafts=num_drafts,
        sampling=sampling,
        refine_sampling=refine_sampling,
        output_schema=output_schema,
        context=context_struct,
        strategy_hints=strategy_hints or [],
        request_id=request_id,
        disable_thinking_trace=disable_thinking_trace,
        disable_default_arithmetic=disable_default_arithmetic,
        selection_policy=selection_policy,
        program_drafts=program_drafts,  # None: unset, the Scheduler's --program-drafts
        draft_count=pb.DraftCount.Value(f"DRAFT_COUNT_{draft_count.upper()}") if draft_count else 0,
    )


class DeliberateClient:
    """`tls_ca_file` verifies a TLS Scheduler (any tls_* turns TLS on; no CA file: the system's CAs);
    `tls_cert_file` and `tls_key_file` are the client certificate an mTLS Scheduler demands; `token` is sent as
    `authorization: Bearer <token>` on every call, over TLS or, without it, to a loopback address only
    (gRPC refuses to send call credentials in plain text elsewhere). See docs/security.md."""

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        *,
        tls_ca_file: str = "",
        tls_cert_file: str = "",
        tls_key_file: str = "",
        token: str = "",
    ):
        self.channel = open_channel(address, tls_ca_file, tls_cert_file, tls_key_file, token)
        self.stub = scheduler_service_pb2_grpc.SchedulerServiceStub(self.channel)

    def solve(self, request: pb.SolveRequest, timeout: float | None = None) -> pb.SolveResponse:
        return self.stub.Solve(request, timeout=timeout)

    def solve_stream(self, request: pb.SolveRequest, timeout: float | None = None) -> Iterator[pb.SolveStreamResponse]:
        """Stage events as they happen; the last one carries `final`."""
        return self.stub.SolveStream(pb.SolveStreamRequest(request=request), timeout=timeout)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> DeliberateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_channel(address: str, ca_file: str, cert_file: str, key_file: str, token: str) -> grpc.Channel:
    def read(path: str) -> bytes | None:
        return Path(path).read_bytes() if path else None

    if ca_file or cert_file or key_file:
        if bool(cert_file) != bool(key_file):
            raise ValueError("tls_cert_file and tls_key_file go together")
        credentials = grpc.ssl_channel_credentials(read(ca_file), read(key_file), read(cert_file))
    elif token:  # plain text, as gRPC allows call credentials there: only to a loopback address
        credentials = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    else:
        return grpc.insecure_channel(address)
    if token:
        credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
    return grpc.secure_channel(address, credentials)


def to_json(message) -> str:
    """protobuf's canonical JSON mapping."""
    return json_format.MessageToJson(message, preserving_proto_field_name=False)
