"""gRPC edge of the Verifier: validates the call, compiles the constraints, runs the rules on every draft,
records one span per draft. VerifyStream checks drafts while they grow (`streaming`) and verifies each in full
when it ends."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from functools import lru_cache

import grpc
from google.protobuf import struct_pb2
from opentelemetry import trace

from deliberate_api.common.v1 import common_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core import metrics, telemetry
from ..core.convert import FINISH_REASON_NAMES, set_duration, struct_to_dict
from ..core.requests import InvalidArgument
from ..decisions.packs import Quality, RulePack
from .arithmetic import computations
from .constraints import ConstraintSpec, RuleSet, compile_rules
from .judge import Judge
from .limits import CHECK_CONSTRAINTS, VERIFY_DRAFTS_OWN_FIELDS, VERIFY_STREAM_START
from .pack_rules import scored
from .rules import Verdict, verify
from .settings import VerifierSettings
from .streaming import GrowingDraft, PrefixFailure

log = logging.getLogger("deliberate.verifier")
tracer = trace.get_tracer("deliberate.verifier")


def constraint_specs(constraints) -> list[ConstraintSpec]:
    specs = []
    for index, c in enumerate(constraints):
        kind = c.WhichOneof("kind")
        if kind is None:
            raise InvalidArgument(f"constraints[{index}]", "set one of json_schema, cel_expression, rule_pack")
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


class VerifierServicer(verifier_service_pb2_grpc.VerifierServiceServicer):
    def __init__(
        self,
        settings: VerifierSettings,
        judge: Judge | None = None,
        services: Mapping[str, object] | None = None,
    ):
        """`services`: what rule packs may declare they need, by name (`service.pack_services`)."""
        self.settings = settings
        self.judge = judge
        self.services = dict(services or {})
        self.compiled = lru_cache(maxsize=128)(self.check_and_compile)

    def validate(self, request: verifier_service_pb2.VerifyDraftsRequest) -> None:
        """VERIFY_DRAFTS's limits: those of the drafts here, on every call; those of the constraints and context
        in `compile`, once per distinct set. Either way the first field in declaration order is reported."""
        VERIFY_DRAFTS_OWN_FIELDS.check(request, self.settings)

    def compile(self, output_schema: str, constraints, context) -> tuple[RuleSet, dict]:
        """Checked against the constraint limits and compiled once per distinct (schema, constraints, context): the
        Scheduler verifies each draft of a request in its own call, all with the same constraints, and checking a
        100-id context costs more than verifying a draft. Reference data is not part of the compiled rules: packs
        read it per verification. A set that broke a limit or did not compile raised, so it is not cached."""
        serialized = tuple(c.SerializeToString(deterministic=True) for c in constraints)
        return self.compiled((output_schema, serialized, context.SerializeToString(deterministic=True)))

    def check_and_compile(self, key: tuple[str, tuple[bytes, ...], bytes]) -> tuple[RuleSet, dict]:
        output_schema, constraints, context = key
        request = verifier_service_pb2.CheckConstraintsRequest(
            output_schema=output_schema,
            constraints=[common_pb2.Constraint.FromString(c) for c in constraints],
            context=struct_pb2.Struct.FromString(context),
        )
        CHECK_CONSTRAINTS.check(request, self.settings)
        context_dict = struct_to_dict(request.context)
        specs = constraint_specs(request.constraints)
        return compile_rules(request.output_schema, specs, context_dict, self.services), context_dict

    async def VerifyDrafts(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        try:
            self.validate(request)
            rule_set, context_dict = self.compile(request.output_schema, request.constraints, request.context)
        except InvalidArgument as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        if self.judge is None and not rule_set.waits_on_network:  # nothing awaits: one after the other, no tasks
            verdicts = [self.verify_inline(request, draft, rule_set, context_dict) for draft in request.drafts]
        else:
            verdicts = await asyncio.gather(
                *(self.verify_one(request, draft, rule_set, context_dict) for draft in request.drafts)
            )
        return verifier_service_pb2.VerifyDraftsResponse(verdicts=verdicts)

    async def VerifyStream(self, request_iterator, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("item") != "start":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "item: the first message must be `start`")
        start = first.start
        try:
            VERIFY_STREAM_START.check(start, self.settings)
            rule_set, context_dict = self.compile(start.output_schema, start.constraints, start.context)
        except InvalidArgument as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        answers: asyncio.Queue = asyncio.Queue()
        reader = asyncio.ensure_future(self.read_stream(start, request_iterator, rule_set, context_dict, answers))
        try:
            while (answer := await answers.get()) is not None:
                if isinstance(answer, InvalidArgument):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(answer))
                if isinstance(answer, Exception):
                    raise answer
                yield answer
        finally:
            reader.cancel()

    async def read_stream(self, start, request_iterator, rule_set: RuleSet, context_dict: dict, answers: asyncio.Queue):
        """Feeds each delta to its draft's prefix checks (an early verdict at the first hard failure) and
        verifies each ended draft in full, concurrently; ends the answers with None."""
        drafts: dict[str, GrowingDraft] = {}
        finals: set[asyncio.Task] = set()

        async def final(draft: common_pb2.Draft) -> None:
            verdict = await self.verify_one(start, draft, rule_set, context_dict)
            answers.put_nowait(verifier_service_pb2.VerifyStreamResponse(verdict=verdict))

        try:
            async for message in request_iterator:
                kind = message.WhichOneof("item")
                if kind == "start":
                    raise InvalidArgument("start", "sent more than once")
                draft_id = message.delta.draft_id if kind == "delta" else message.end.id
                growing = drafts.setdefault(draft_id, GrowingDraft(rule_set.prefix_checks))
                if kind == "delta":
                    self.check_draft_chars(f"delta({draft_id}).text", len(growing.text) + len(message.delta.text))
                    if failure := growing.extend(message.delta.text, message.delta.tokens):
                        answers.put_nowait(early_response(start.request_id, draft_id, failure))
                elif kind == "end" and growing.failure is None and not growing.ended:
                    growing.ended = True
                    self.check_draft_chars(f"end({draft_id}).text", len(message.end.text))
                    task = asyncio.ensure_future(final(message.end))
                    finals.add(task)
                    task.add_done_callback(finals.discard)
            await asyncio.gather(*finals)
            answers.put_nowait(None)
        except Exception as error:  # handed to the handler, which answers the call with it
            answers.put_nowait(error)

    def check_draft_chars(self, path: str, chars: int) -> None:
        if chars > self.settings.max_draft_chars:
            raise InvalidArgument(path, f"has {chars} characters; the limit is {self.settings.max_draft_chars}")

    async def CheckConstraints(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        try:
            rule_set, _ = self.compile(request.output_schema, request.constraints, request.context)
        except InvalidArgument as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        response = verifier_service_pb2.CheckConstraintsResponse(rule_ids=rule_set.rule_ids)
        reference = await asyncio.to_thread(rule_set.reference_plan)  # a solver, and maybe the reference store
        if reference is not None:
            response.reference_plan.CopyFrom(reference_plan_proto(*reference))
        return response

    def verify_inline(self, request, draft: common_pb2.Draft, rule_set: RuleSet, context_dict: dict):
        """`verify_one` where nothing awaits (no judge, no reference store): the rules only, microseconds of CPU.
        Its span is recorded once the verdict is known, with the same start, parent and attributes: nothing inside
        reads the current span, and making the span current costs about as much as verifying the draft."""
        start_ns, started = time.time_ns(), time.perf_counter()
        proto = verdict_to_proto(draft.id, verify(*verify_arguments(draft, rule_set, context_dict)), 0.0)
        report_computations(request, draft, proto)
        attributes = draft_attributes(request, draft)
        span = tracer.start_span("verifier.verify_draft", attributes=attributes, start_time=start_ns)
        finish(proto, started, span)
        span.end()
        return proto

    async def verify_one(self, request, draft: common_pb2.Draft, rule_set: RuleSet, context_dict: dict):
        """Rules run inline (microseconds of CPU) unless they wait on the network (the reference store, the
        risk model), up to its timeout: those run in a worker thread, in this span's trace context. The judge
        awaits, so drafts overlap there."""
        with tracer.start_as_current_span("verifier.verify_draft", attributes=draft_attributes(request, draft)) as span:
            started = time.perf_counter()
            arguments = verify_arguments(draft, rule_set, context_dict)
            verdict = await asyncio.to_thread(verify, *arguments) if rule_set.waits_on_network else verify(*arguments)
            proto = verdict_to_proto(draft.id, verdict, 0.0)
            report_computations(request, draft, proto)
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
            finish(proto, started, span)
        return proto


def report_computations(request, draft: common_pb2.Draft, proto: common_pb2.DraftVerdict) -> None:
    """The draft's computations, for the Scheduler's consensus prefix, only when it asks (they cost a scan)."""
    if request.report_computations:
        proto.computations.extend(common_pb2.Computation(key=c.key, line=c.line) for c in computations(draft.text))


def verify_arguments(draft: common_pb2.Draft, rule_set: RuleSet, context_dict: dict) -> tuple:
    """`verify`'s arguments: a draft that declares itself a program gets the program rules."""
    finish_reason = FINISH_REASON_NAMES.get(draft.finish_reason, "stop")
    rules = rule_set.rules_for(draft.kind)
    return draft.text, rules, finish_reason, rule_set.output_schema, context_dict, draft.kind


def draft_attributes(request, draft: common_pb2.Draft) -> dict:
    return {telemetry.REQUEST_ID: request.request_id, telemetry.DRAFT_ID: draft.id}


def finish(proto: common_pb2.DraftVerdict, started: float, span) -> None:
    """The verdict's latency, the duration metric and the span's outcome."""
    elapsed = time.perf_counter() - started
    set_duration(proto.latency, elapsed)
    metrics.VERIFICATION_DURATION.record(elapsed, {"valid": str(proto.valid).lower()})
    span.set_attributes({telemetry.DRAFT_VALID: proto.valid, telemetry.DRAFT_SCORE: proto.score})
    span.set_attributes(telemetry.quality_attributes(proto))


def quality_proto(quality: Quality) -> common_pb2.PlanQuality:
    proto = common_pb2.PlanQuality(
        name=quality.name, objective=quality.objective, description=quality.describe(), rule_pack=quality.pack or ""
    )
    if quality.bound is not None:
        proto.bound = quality.bound
        proto.ratio = quality.ratio
    return proto


def reference_plan_proto(pack: RulePack, answer: dict) -> common_pb2.ReferencePlan:
    """The plan a pack computed itself, with its quality as the pack scores it."""
    plan = common_pb2.ReferencePlan(answer=json.dumps(answer, separators=(",", ":")), rule_pack=pack.name)
    quality = scored(pack, pack.answer_model.model_validate(answer)) if pack.answer_model is not None else None
    if quality is not None:
        plan.quality.CopyFrom(quality_proto(quality))
    return plan


def verdict_to_proto(draft_id: str, verdict: Verdict, latency_s: float) -> common_pb2.DraftVerdict:
    proto = common_pb2.DraftVerdict(
        draft_id=draft_id,
        valid=verdict.valid,
        score=verdict.score,
        extracted_answer=verdict.extracted_answer or "",
        evidence=verdict.evidence,
    )
    if verdict.quality is not None:
        proto.quality.CopyFrom(quality_proto(verdict.quality))
    set_duration(proto.latency, latency_s)
    for o in verdict.outcomes:
        result = proto.rule_results.add(
            rule_id=o.rule_id,
            passed=o.passed,
            message=o.message,
            hard=o.hard,
            abstained=o.abstained,
            substantive=o.substantive,
        )
        set_duration(result.duration, o.duration_s)
    return proto


def early_response(request_id: str, draft_id: str, failure: PrefixFailure) -> verifier_service_pb2.VerifyStreamResponse:
    """The verdict of a draft that failed a hard rule on its prefix, with where; recorded as its span."""
    with tracer.start_as_current_span(
        "verifier.verify_draft",
        attributes={
            telemetry.REQUEST_ID: request_id,
            telemetry.DRAFT_ID: draft_id,
            telemetry.DRAFT_VALID: False,
            telemetry.DRAFT_SCORE: 0.0,
            telemetry.DRAFT_ABORT_RULE: failure.rule_id,
            telemetry.DRAFT_ABORT_CHARS: failure.chars,
            telemetry.DRAFT_ABORT_TOKENS: failure.tokens,
            telemetry.DRAFT_ABORT_LINE: failure.line,
        },
    ):
        metrics.VERIFICATION_DURATION.record(0.0, {"valid": "false"})
    result = common_pb2.RuleResult(
        rule_id=failure.rule_id,
        passed=False,
        message=failure.message,
        hard=True,
        substantive=True,
        failed_at=common_pb2.DraftPosition(chars=failure.chars, tokens=failure.tokens, line=failure.line),
    )
    verdict = common_pb2.DraftVerdict(draft_id=draft_id, valid=False, score=0.0, rule_results=[result])
    return verifier_service_pb2.VerifyStreamResponse(verdict=verdict, early=True)
