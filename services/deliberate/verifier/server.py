"""gRPC edge of the Verifier: validates the call, compiles the constraints, runs the rules on every draft,
records one span per draft."""

from __future__ import annotations

import asyncio
import logging
import time
from functools import lru_cache

import grpc
from opentelemetry import trace

from deliberate_api.common.v1 import common_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core import metrics, telemetry
from ..core.convert import FINISH_REASON_NAMES, duration, struct_to_dict
from ..core.requests import InvalidArgument
from .arithmetic import computations
from .constraints import ConstraintError, ConstraintSpec, RuleSet, compile_rules
from .judge import Judge
from .limits import CHECK_CONSTRAINTS, VERIFY_DRAFTS
from .reference import ReferenceStore
from .rules import Verdict, verify
from .settings import VerifierSettings

log = logging.getLogger("deliberate.verifier")
tracer = trace.get_tracer("deliberate.verifier")


def constraint_specs(constraints) -> list[ConstraintSpec]:
    specs = []
    for index, c in enumerate(constraints):
        kind = c.WhichOneof("kind")
        if kind is None:
            raise ConstraintError(f"constraints[{index}]", "set one of json_schema, cel_expression, rule_pack")
        specs.append(
            ConstraintSpec(
                index=index,
                kind=kind,
                source=getattr(c, kind),
                id=c.id,
                soft=c.soft,
                params=struct_to_dict(c.params),
                failure_message=c.failure_message,
            )
        )
    return specs


def compile_request(
    output_schema: str, constraints, context, reference: ReferenceStore | None = None
) -> tuple[RuleSet, dict]:
    """Compiled once per distinct (schema, constraints, context): the Scheduler verifies each draft of a
    request in its own call, all with the same constraints. Reference data is not part of the compiled
    rules: packs read it per verification."""
    key = verifier_service_pb2.CheckConstraintsRequest(
        output_schema=output_schema, constraints=constraints, context=context
    ).SerializeToString(deterministic=True)
    return _compiled_request(key, reference)


@lru_cache(maxsize=128)
def _compiled_request(key: bytes, reference: ReferenceStore | None) -> tuple[RuleSet, dict]:
    request = verifier_service_pb2.CheckConstraintsRequest.FromString(key)
    context_dict = struct_to_dict(request.context)
    specs = constraint_specs(request.constraints)
    return compile_rules(request.output_schema, specs, context_dict, reference), context_dict


class VerifierServicer(verifier_service_pb2_grpc.VerifierServiceServicer):
    def __init__(self, settings: VerifierSettings, judge: Judge | None = None, reference: ReferenceStore | None = None):
        self.settings = settings
        self.judge = judge
        self.reference = reference

    def validate(self, request: verifier_service_pb2.VerifyDraftsRequest) -> None:
        VERIFY_DRAFTS.check(request, self.settings)

    async def VerifyDrafts(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        try:
            self.validate(request)
            rule_set, context_dict = compile_request(
                request.output_schema, request.constraints, request.context, self.reference
            )
        except (InvalidArgument, ConstraintError) as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        verdicts = await asyncio.gather(
            *(self.verify_one(request, draft, rule_set, context_dict) for draft in request.drafts)
        )
        return verifier_service_pb2.VerifyDraftsResponse(verdicts=verdicts)

    async def CheckConstraints(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        try:
            CHECK_CONSTRAINTS.check(request, self.settings)
            rule_set, _ = compile_request(request.output_schema, request.constraints, request.context, self.reference)
        except (InvalidArgument, ConstraintError) as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        return verifier_service_pb2.CheckConstraintsResponse(rule_ids=rule_set.rule_ids)

    async def verify_one(self, request, draft: common_pb2.Draft, rule_set: RuleSet, context_dict: dict):
        """Rules run inline (microseconds of CPU) unless they read the reference store, which may wait up to
        its timeout: those run in a worker thread. The judge awaits, so drafts overlap there."""
        with tracer.start_as_current_span(
            "verifier.verify_draft",
            attributes={telemetry.REQUEST_ID: request.request_id, telemetry.DRAFT_ID: draft.id},
        ) as span:
            started = time.perf_counter()
            finish_reason = FINISH_REASON_NAMES.get(draft.finish_reason, "stop")
            arguments = (draft.text, rule_set.rules, finish_reason, rule_set.output_schema, context_dict)
            verdict = await asyncio.to_thread(verify, *arguments) if rule_set.reads_store else verify(*arguments)
            proto = verdict_to_proto(draft.id, verdict, 0.0)
            if request.report_computations:
                proto.computations.extend(
                    common_pb2.Computation(key=c.key, line=c.line) for c in computations(draft.text)
                )
            if self.judge is not None and verdict.valid:
                judged = await self.judge.judge(request.prompt, draft.text)
                proto.judge.CopyFrom(judged.to_proto())
                proto.judge.hard = self.judge.hard
                proto.score = judged.blend(verdict.score)
                if not judged.valid and self.judge.hard:
                    proto.valid = False
                    del proto.evidence[:]
                elif self.judge.hard and judged.usable and judged.valid:  # a hard judge's yes is evidence
                    proto.evidence.append("judge")
            elapsed = time.perf_counter() - started
            proto.latency.CopyFrom(duration(elapsed))
            metrics.VERIFICATION_DURATION.record(elapsed, {"valid": str(proto.valid).lower()})
            span.set_attributes({telemetry.DRAFT_VALID: proto.valid, telemetry.DRAFT_SCORE: proto.score})
        return proto


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
                abstained=o.abstained,
                substantive=o.substantive,
            )
            for o in verdict.outcomes
        ],
        evidence=verdict.evidence,
    )
