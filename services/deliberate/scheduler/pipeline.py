"""The staged solve: draft → verify (overlapped with drafting) → select → refine, with re-drafting.

Every hop gets the time left of the client's deadline. Each draft is one span, `deliberate.draft`,
opened when the draft arrives and ended when it is selected or discarded; the Verifier's span for the
draft is its child. When no draft of a round passes the hard rules, another round runs with other
strategy hints, a higher temperature and the Verifier's messages in the prompt, up to the configured
number of re-drafts; after that the best attempt is answered as UNVERIFIED with every error.

A request without an output schema gets the arithmetic rule pack (hard) unless it turns that off
(`SolveRequest.disable_default_arithmetic`). An answer is VERIFIED only when its best draft passed a
substantive check (`selection`); a draft that passed every hard rule on format alone makes it UNCHECKED.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc
from opentelemetry import trace
from opentelemetry.trace import Span

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core import telemetry
from ..core.convert import duration
from .load import Decision, LoadMonitor
from .selection import Scored, Selection, answer_key, select, structural_signature
from .settings import SchedulerSettings
from .state import FileStateStore, StateStore
from .watchdog import Watchdog
from .weights import DecisionFeatures, WeightLearner, latency_fraction

tracer = trace.get_tracer("deliberate.scheduler")

Emit = Callable[[pb.SolveStreamResponse], None]

# How many distinct Verifier messages a re-draft prompt carries.
MAX_FEEDBACK_MESSAGES = 3
# The rule pack every request without an output schema gets, unless it sets disable_default_arithmetic.
DEFAULT_ARITHMETIC = common_pb2.Constraint(rule_pack="arithmetic")


def effective_constraints(request: pb.SolveRequest) -> list[common_pb2.Constraint]:
    """The request's constraints, plus the arithmetic pack (hard) by default for a request without an
    output schema that did not declare it itself and did not turn the default off."""
    constraints = list(request.constraints)
    if request.output_schema.strip() or request.disable_default_arithmetic:
        return constraints
    if any(c.WhichOneof("kind") == "rule_pack" and c.rule_pack == "arithmetic" for c in constraints):
        return constraints
    return [*constraints, DEFAULT_ARITHMETIC]


class StageError(Exception):
    """A stage failed; the edge answers with `code` and `message`."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class Deadline:
    def __init__(self, seconds: float):
        self.expires = time.monotonic() + seconds

    def left(self) -> float:
        return self.expires - time.monotonic()

    def remaining(self, stage: str) -> float:
        left = self.left()
        if left <= 0:
            raise StageError(grpc.StatusCode.DEADLINE_EXCEEDED, f"deadline exceeded before {stage}")
        return left


@asynccontextmanager
async def stage(name: str):
    """Turns a failed downstream call into a StageError that names the stage."""
    try:
        yield
    except grpc.aio.AioRpcError as error:
        code = error.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise StageError(code, f"deadline exceeded during {name}") from None
        if code == grpc.StatusCode.INVALID_ARGUMENT:  # names the request's field; pass it on as it is
            raise StageError(code, error.details()) from None
        if code == grpc.StatusCode.UNAVAILABLE:
            raise StageError(code, f"{name} unavailable: {error.details()}") from None
        raise StageError(code, f"{name} failed: {error.details()}") from None


@dataclass
class Stubs:
    drafter: drafter_service_pb2_grpc.DrafterServiceStub
    verifier: verifier_service_pb2_grpc.VerifierServiceStub
    refiner: refiner_service_pb2_grpc.RefinerServiceStub

    @classmethod
    def connect(cls, settings: SchedulerSettings) -> Stubs:
        return cls(
            drafter_service_pb2_grpc.DrafterServiceStub(grpc.aio.insecure_channel(settings.drafter_address)),
            verifier_service_pb2_grpc.VerifierServiceStub(grpc.aio.insecure_channel(settings.verifier_address)),
            refiner_service_pb2_grpc.RefinerServiceStub(grpc.aio.insecure_channel(settings.refiner_address)),
        )


@dataclass
class DraftState:
    report: pb.DraftReport
    span: Span
    verification: asyncio.Future | None = None


@dataclass
class Solve:
    """The state of one request as it moves through the stages."""

    request: pb.SolveRequest
    request_id: str
    deadline: Deadline
    emit: Emit
    drafts: dict[str, DraftState] = field(default_factory=dict)
    signatures: dict[str, str] = field(default_factory=dict)  # structural signature → first draft id
    timings: dict[str, float] = field(default_factory=dict)
    rounds: int = 0
    constraints: list[common_pb2.Constraint] = field(default_factory=list)  # see `effective_constraints`

    def reports(self) -> list[pb.DraftReport]:
        return [state.report for state in self.drafts.values()]


class Pipeline:
    def __init__(
        self,
        settings: SchedulerSettings,
        stubs: Stubs,
        learner: StateStore | None = None,
        load: LoadMonitor | None = None,
        watchdog: Watchdog | None = None,
    ):
        self.settings = settings
        self.stubs = stubs
        self.learner = learner or FileStateStore(WeightLearner())
        self.load = load
        self.watchdog = watchdog

    def draft_count(self, requested: int) -> Decision:
        if self.load is not None:
            return self.load.resolve(requested, self.settings.max_drafts)
        n = requested or self.settings.default_num_drafts
        reason = "requested by the client" if requested else "the configured default"
        return Decision(num_drafts=n, fast_mode=False, reason=reason, utilization=0.0)

    async def solve(self, request: pb.SolveRequest, deadline_s: float, emit: Emit) -> pb.SolveResponse:
        solve = Solve(request, request.request_id or uuid.uuid4().hex[:16], Deadline(deadline_s), emit)
        solve.constraints = effective_constraints(request)
        span = trace.get_current_span()
        span.set_attribute(telemetry.REQUEST_ID, solve.request_id)
        decision = self.draft_count(request.num_drafts)
        started = time.perf_counter()
        try:
            await self.check_constraints(solve)
            await self.draft_rounds(solve, decision)
            response = await self.select_and_refine(solve)
        finally:
            for state in solve.drafts.values():  # a failed stage leaves drafts unfinished
                if state.verification:
                    state.verification.cancel()
                if state.span.is_recording():
                    state.span.set_attribute(telemetry.DRAFT_OUTCOME, "abandoned")
                    state.span.end()
        solve.timings["total"] = time.perf_counter() - started
        response.timings.CopyFrom(pb.StageTimings(**{k: duration(v) for k, v in solve.timings.items()}))
        response.trace_id = telemetry.current_trace_id()
        response.num_drafts = decision.num_drafts
        response.num_drafts_reason = decision.reason
        response.rounds = solve.rounds
        span.set_attribute(telemetry.SOLVE_STATUS, pb.SolveStatus.Name(response.status))
        return response

    async def check_constraints(self, solve: Solve) -> None:
        """A constraint that does not compile is refused before any token is generated."""
        request = solve.request
        if not (request.constraints or request.output_schema):
            return
        check = verifier_service_pb2.CheckConstraintsRequest(
            output_schema=request.output_schema, constraints=solve.constraints, context=request.context
        )
        await self.call_verifier(solve, self.stubs.verifier.CheckConstraints, check, "checking constraints")

    async def draft_rounds(self, solve: Solve, decision: Decision) -> None:
        feedback = ""
        for round_ in range(self.settings.max_redrafts + 1):
            reason = decision.reason if round_ == 0 else f"re-draft {round_}: no draft passed every hard rule"
            solve.emit(
                pb.SolveStreamResponse(
                    round_started=pb.RoundStarted(
                        round=round_, num_drafts=decision.num_drafts, reason=reason, feedback=feedback
                    )
                )
            )
            solve.rounds = round_ + 1
            round_drafts = await self.draft_and_verify(solve, decision, round_, feedback)
            if any(r.verdict.valid for r in round_drafts) or not round_drafts:
                return
            feedback = verifier_feedback(round_drafts)

    async def draft_and_verify(
        self, solve: Solve, decision: Decision, round_: int, feedback: str
    ) -> list[pb.DraftReport]:
        """Verification of each draft starts as soon as it arrives, while the others are still generated."""
        request = solve.request
        trace.get_current_span().set_attribute(telemetry.NUM_DRAFTS, decision.num_drafts)
        sampling = common_pb2.SamplingParams()
        sampling.CopyFrom(request.sampling)
        if round_:  # a re-draft explores more
            base = request.sampling.temperature if request.sampling.HasField("temperature") else 0.3
            sampling.temperature = min(2.0, base + self.settings.redraft_temperature_step * round_)
        started = time.perf_counter()
        before = set(solve.drafts)
        async with stage("drafter"):
            call = self.stubs.drafter.GenerateDrafts(
                drafter_service_pb2.GenerateDraftsRequest(
                    request_id=solve.request_id,
                    prompt=request.prompt,
                    num_drafts=decision.num_drafts,
                    strategies=request.strategy_hints if round_ == 0 else [],
                    sampling=sampling,
                    output_schema=request.output_schema,
                    round=round_,
                    feedback=feedback,
                    fast_mode=decision.fast_mode,
                ),
                timeout=solve.deadline.remaining("drafting"),
            )
            if self.load is not None:
                self.load.engine.begin(decision.num_drafts)
            try:
                async for message in call:
                    self.accept_draft(solve, message.draft, round_)
            finally:
                if self.load is not None:
                    self.load.engine.end(decision.num_drafts)
        drafted = time.perf_counter()
        solve.timings["draft"] = solve.timings.get("draft", 0.0) + drafted - started
        new = [solve.drafts[i] for i in solve.drafts if i not in before]
        await asyncio.gather(*(state.verification for state in new))
        solve.timings["verify"] = solve.timings.get("verify", 0.0) + time.perf_counter() - drafted
        return [state.report for state in new]

    def accept_draft(self, solve: Solve, draft: common_pb2.Draft, round_: int) -> None:
        span = tracer.start_span(
            "deliberate.draft",
            attributes={
                telemetry.REQUEST_ID: solve.request_id,
                telemetry.DRAFT_ID: draft.id,
                telemetry.DRAFT_INDEX: draft.index,
                telemetry.DRAFT_STRATEGY: draft.strategy,
                telemetry.DRAFT_TOKENS: draft.usage.completion_tokens,
            },
        )
        span.add_event("generated")
        state = DraftState(pb.DraftReport(draft=draft, round=round_), span)
        solve.drafts[draft.id] = state
        solve.emit(pb.SolveStreamResponse(draft_generated=pb.DraftGenerated(draft=draft)))
        signature = structural_signature(draft.text)
        original = solve.signatures.setdefault(signature, draft.id)
        with trace.use_span(span, end_on_exit=False):  # the Verifier's span becomes the draft's child
            if original == draft.id:
                state.verification = asyncio.ensure_future(self.verify(solve, state))
            else:
                state.report.duplicate_of = original
                state.verification = asyncio.ensure_future(self.share_verdict(solve, state, solve.drafts[original]))

    async def verify(self, solve: Solve, state: DraftState) -> None:
        request = solve.request
        verify_request = verifier_service_pb2.VerifyDraftsRequest(
            request_id=solve.request_id,
            prompt=request.prompt,
            drafts=[state.report.draft],
            output_schema=request.output_schema,
            constraints=solve.constraints,
            context=request.context,
        )
        timeout = self.settings.verify_timeout_s
        try:
            response = await self.call_verifier(
                solve, self.stubs.verifier.VerifyDrafts, verify_request, "verification", timeout
            )
            verdict = response.verdicts[0]
        except StageError as error:
            if error.code != grpc.StatusCode.DEADLINE_EXCEEDED or solve.deadline.left() <= 0:
                raise
            verdict = late_verdict(state.report.draft.id, timeout)  # never waited for past the timeout
        self.record_verdict(solve, state, verdict)

    async def share_verdict(self, solve: Solve, state: DraftState, original: DraftState) -> None:
        """A structural duplicate is not verified again: it shares the earlier draft's verdict."""
        await original.verification
        verdict = common_pb2.DraftVerdict()
        verdict.CopyFrom(original.report.verdict)
        verdict.draft_id = state.report.draft.id
        state.span.set_attribute("deliberate.draft.duplicate_of", original.report.draft.id)
        self.record_verdict(solve, state, verdict)

    def record_verdict(self, solve: Solve, state: DraftState, verdict: common_pb2.DraftVerdict) -> None:
        state.report.verdict.CopyFrom(verdict)
        state.span.add_event("verified")
        state.span.set_attributes({telemetry.DRAFT_VALID: verdict.valid, telemetry.DRAFT_SCORE: verdict.score})
        solve.emit(pb.SolveStreamResponse(draft_verified=pb.DraftVerified(verdict=verdict)))

    async def call_verifier(self, solve: Solve, method, request, what: str, timeout: float | None = None):
        """While the Verifier is down (the watchdog restarts it), wait for it up to the deadline; then
        UNAVAILABLE, shortly before the client's own deadline would hide the reason."""
        while True:
            left = solve.deadline.remaining(what)
            try:
                async with stage("verifier"):
                    return await method(request, timeout=min(left, timeout or left))
            except StageError as error:
                if error.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                wait = solve.deadline.left() - self.settings.unavailable_margin_s
                if wait <= 0 or not await self.wait_for_verifier(wait):
                    raise StageError(error.code, f"{error.message} (waited until the deadline)") from None

    async def wait_for_verifier(self, at_most_s: float) -> bool:
        if self.watchdog is not None:
            return await self.watchdog.wait_healthy(at_most_s)
        await asyncio.sleep(min(at_most_s, 0.5))
        return at_most_s > 0.5

    async def select_and_refine(self, solve: Solve) -> pb.SolveResponse:
        started = time.perf_counter()
        if not solve.drafts:
            return pb.SolveResponse(
                request_id=solve.request_id,
                status=pb.SOLVE_STATUS_FAILED,
                status_reason="the drafter returned no drafts",
            )
        load = self.load.current().utilization if self.load is not None else 0.0
        weights = self.learner.weights_for_load(load)
        selection = select(
            [
                Scored(
                    s.report.draft.id,
                    s.report.draft.index + 100 * s.report.round,
                    s.report.verdict.valid,
                    s.report.verdict.score,
                    latency_fraction(
                        s.report.verdict.latency.ToTimedelta().total_seconds(), self.settings.verify_timeout_s
                    ),
                    s.report.verdict.extracted_answer,
                    tuple(s.report.verdict.evidence),
                )
                for s in solve.drafts.values()
            ],
            self.settings.max_selected,
            weights,
        )
        for draft_id, c in selection.components.items():
            solve.drafts[draft_id].report.components.CopyFrom(
                pb.ScoreComponents(
                    score=c.score,
                    agreement=c.agreement,
                    latency=c.latency,
                    answer_share=c.answer_share,
                    final=c.final,
                    alpha=weights.alpha,
                    beta=weights.beta,
                    gamma=weights.gamma,
                    delta=weights.delta,
                )
            )
        best = selection.components[selection.selected[0].draft_id]
        await self.learner.record(
            solve.request_id, DecisionFeatures(best.score, best.agreement, best.latency, best.answer_share)
        )
        self.announce(solve, selection)
        solve.timings["select"] = time.perf_counter() - started

        started = time.perf_counter()
        refined = await self.refine(solve, selection)
        solve.timings["refine"] = time.perf_counter() - started

        reports = solve.reports()
        usage = common_pb2.TokenUsage(
            prompt_tokens=sum(r.draft.usage.prompt_tokens for r in reports) + refined.usage.prompt_tokens,
            completion_tokens=sum(r.draft.usage.completion_tokens for r in reports) + refined.usage.completion_tokens,
        )
        reason, answer = selection.reason, refined.text
        best_report = solve.drafts[selection.selected[0].draft_id].report
        if selection.status == "unverified":
            reason += f" after {solve.rounds} round(s); errors: {verifier_feedback(reports, limit=None)}"
        else:
            if selection.status == "unchecked":
                reason += unchecked_detail(best_report.verdict)
            broken = await self.recheck_refined(solve, refined, best_report.verdict)
            if broken:  # the refined answer may never be worse than the best verified draft
                best = best_report.draft
                answer = f"{refined.thinking_trace}\n{best.text}" if refined.thinking_trace else best.text
                reason += f"; refinement rejected ({broken}); answering with the best draft #{best.index}"
        return pb.SolveResponse(
            request_id=solve.request_id,
            answer=answer,
            status=STATUS[selection.status],
            status_reason=reason,
            verified_by=selection.verified_by,
            drafts=reports,
            selected_draft_ids=[d.draft_id for d in selection.selected],
            thinking_trace=refined.thinking_trace,
            usage=usage,
            consensus_prefix=refined.consensus_prefix,
            refine_token_budget=refined.token_budget,
            refine_budget_reason=refined.budget_reason,
        )

    async def recheck_refined(
        self, solve: Solve, refined: refiner_service_pb2.RefineFinal, best: common_pb2.DraftVerdict
    ) -> str:
        """Verifies the refined answer against the request's hard rules; returns why it fails ("" when it passes).
        An answer that cannot be checked counts as failing: the verified draft is the safe answer. So does
        a refined answer that states another final answer than the best draft without evidence of its own:
        the status rests on the draft's checks, which say nothing about a different answer."""
        request = solve.request
        text = refined.text.removeprefix(refined.thinking_trace).lstrip("\n")
        check = verifier_service_pb2.VerifyDraftsRequest(
            request_id=solve.request_id,
            prompt=request.prompt,
            drafts=[common_pb2.Draft(id=f"{solve.request_id}-refined", text=text, finish_reason=refined.finish_reason)],
            output_schema=request.output_schema,
            constraints=solve.constraints,
            context=request.context,
        )
        try:
            verdict = (
                await self.call_verifier(
                    solve, self.stubs.verifier.VerifyDrafts, check, "re-verification", self.settings.verify_timeout_s
                )
            ).verdicts[0]
        except StageError as error:
            if error.code == grpc.StatusCode.DEADLINE_EXCEEDED and solve.deadline.left() <= 0:
                raise
            return f"could not be re-verified: {error.message}"
        trace.get_current_span().add_event("refined.verified", {telemetry.DRAFT_VALID: verdict.valid})
        if not verdict.valid:
            return "; ".join(r.message for r in verdict.rule_results if r.hard and not r.passed)
        if (
            best.evidence
            and not verdict.evidence
            and answer_key(verdict.extracted_answer) != answer_key(best.extracted_answer)
        ):
            return (
                f"its answer {verdict.extracted_answer!r} differs from the checked draft's "
                f"{best.extracted_answer!r} and no substantive check applied to it"
            )
        return ""

    def announce(self, solve: Solve, selection: Selection) -> None:
        ranks = {d.draft_id: rank for rank, d in enumerate(selection.selected)}
        for draft_id, state in solve.drafts.items():
            verdict = state.report.verdict
            if draft_id in ranks:
                state.report.selected = True
                event = pb.SolveStreamResponse(
                    draft_selected=pb.DraftSelected(draft_id=draft_id, rank=ranks[draft_id], score=verdict.score)
                )
                outcome = "selected"
            else:
                reason = "failed a hard rule" if not verdict.valid else "outscored by the selected drafts"
                event = pb.SolveStreamResponse(draft_discarded=pb.DraftDiscarded(draft_id=draft_id, reason=reason))
                outcome = "discarded"
            state.span.set_attribute(telemetry.DRAFT_OUTCOME, outcome)
            state.span.add_event(outcome)
            state.span.end()
            solve.emit(event)

    async def refine(self, solve: Solve, selection: Selection) -> refiner_service_pb2.RefineFinal:
        request = solve.request
        selected = [solve.drafts[d.draft_id].report for d in selection.selected]
        async with stage("refiner"):
            call = self.stubs.refiner.Refine(
                refiner_service_pb2.RefineRequest(
                    request_id=solve.request_id,
                    prompt=request.prompt,
                    selected=[refiner_service_pb2.VerifiedDraft(draft=r.draft, verdict=r.verdict) for r in selected],
                    all_drafts=[r.draft for r in solve.reports()],
                    sampling=request.refine_sampling,
                    output_schema=request.output_schema,
                    disable_thinking_trace=request.disable_thinking_trace,
                    disable_consensus_prefix=request.disable_consensus_prefix,
                ),
                timeout=solve.deadline.remaining("refinement"),
            )
            async for message in call:
                if message.HasField("chunk"):
                    solve.emit(pb.SolveStreamResponse(refine_chunk=pb.RefineChunk(text=message.chunk.text)))
                else:
                    return message.final
        raise StageError(grpc.StatusCode.INTERNAL, "refiner ended its stream without a final message")


STATUS = {
    "verified": pb.SOLVE_STATUS_VERIFIED,
    "unchecked": pb.SOLVE_STATUS_UNCHECKED,
    "unverified": pb.SOLVE_STATUS_UNVERIFIED,
}


def unchecked_detail(verdict: common_pb2.DraftVerdict) -> str:
    """What the best draft of an UNCHECKED answer was checked on, e.g. "; passed: final_answer,
    numeric_answer; abstained: arithmetic abstained: no equation to recompute"."""
    format_checks = [r.rule_id for r in verdict.rule_results if r.passed and not r.abstained]
    abstained = [r.message for r in verdict.rule_results if r.abstained]
    detail = f"; passed: {', '.join(format_checks)}" if format_checks else ""
    if abstained:
        detail += f"; abstained: {'; '.join(abstained)}"
    return detail + "; the answer is not verified"


def late_verdict(draft_id: str, timeout_s: float) -> common_pb2.DraftVerdict:
    message = f"verification_timeout failed: no verdict within {timeout_s:g}s"
    return common_pb2.DraftVerdict(
        draft_id=draft_id,
        valid=False,
        score=0.0,
        rule_results=[common_pb2.RuleResult(rule_id="verification_timeout", passed=False, message=message, hard=True)],
        latency=duration(timeout_s),
    )


def verifier_feedback(reports: list[pb.DraftReport], limit: int | None = MAX_FEEDBACK_MESSAGES) -> str:
    """The distinct hard-rule failures of these drafts, most frequent first, e.g.
    "budget_check failed: sum=5023 > 5000"."""
    counts: dict[str, int] = {}
    for report in reports:
        for rule in report.verdict.rule_results:
            if rule.hard and not rule.passed:
                counts[rule.message] = counts.get(rule.message, 0) + 1
    ordered = sorted(counts, key=lambda m: -counts[m])
    return "; ".join(ordered[:limit])
