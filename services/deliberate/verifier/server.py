"""gRPC edge of the Verifier: validates the call, runs the rules on every draft, records one span per draft."""

from __future__ import annotations

import logging
import time

import grpc
from opentelemetry import trace

from deliberate.common.v1 import common_pb2
from deliberate.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core import telemetry
from ..core.convert import FINISH_REASON_NAMES, duration
from ..core.requests import InvalidArgument, parse_output_schema, reject_constraints, require_text
from .rules import Verdict, verify_text
from .settings import VerifierSettings

log = logging.getLogger("deliberate.verifier")
tracer = trace.get_tracer("deliberate.verifier")


class VerifierServicer(verifier_service_pb2_grpc.VerifierServiceServicer):
    def __init__(self, settings: VerifierSettings):
        self.settings = settings

    def validate(self, request: verifier_service_pb2.VerifyDraftsRequest) -> dict | None:
        require_text("prompt", request.prompt, self.settings.max_prompt_chars)
        if not request.drafts:
            raise InvalidArgument("drafts", "must not be empty")
        if len(request.drafts) > self.settings.max_drafts:
            raise InvalidArgument("drafts", f"{len(request.drafts)} drafts; the limit is {self.settings.max_drafts}")
        for i, draft in enumerate(request.drafts):
            if len(draft.text) > self.settings.max_draft_chars:
                raise InvalidArgument(f"drafts[{i}].text", f"longer than {self.settings.max_draft_chars} characters")
        reject_constraints(request.constraints)
        return parse_output_schema(request.output_schema)

    async def VerifyDrafts(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        try:
            schema = self.validate(request)
        except InvalidArgument as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))

        verdicts = []
        for draft in request.drafts:
            with tracer.start_as_current_span(
                "verifier.verify_draft",
                attributes={telemetry.REQUEST_ID: request.request_id, telemetry.DRAFT_ID: draft.id},
            ) as span:
                started = time.perf_counter()
                verdict = verify_text(draft.text, schema, FINISH_REASON_NAMES.get(draft.finish_reason, "stop"))
                proto = verdict_to_proto(draft.id, verdict, time.perf_counter() - started)
                span.set_attributes({telemetry.DRAFT_VALID: proto.valid, telemetry.DRAFT_SCORE: proto.score})
            verdicts.append(proto)
        return verifier_service_pb2.VerifyDraftsResponse(verdicts=verdicts)


def verdict_to_proto(draft_id: str, verdict: Verdict, latency_s: float) -> common_pb2.DraftVerdict:
    return common_pb2.DraftVerdict(
        draft_id=draft_id,
        valid=verdict.valid,
        score=verdict.score,
        extracted_answer=verdict.extracted_answer or "",
        latency=duration(latency_s),
        rule_results=[
            common_pb2.RuleResult(
                rule_id=o.rule_id,
                passed=o.passed,
                message=o.message,
                hard=o.hard,
                duration=duration(o.duration_s),
            )
            for o in verdict.outcomes
        ],
    )
