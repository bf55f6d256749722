"""The staged solve: draft → verify (overlapped with drafting) → select → refine, with re-drafting.

Every hop gets the time left of the client's deadline. Each draft is one span, `deliberate.draft`,
opened when the draft arrives and ended when it is selected or discarded; the Verifier's span for the
draft is its child. When no draft of a round passes the hard rules, another round runs with other
strategy hints, a higher temperature and the Verifier's messages in the prompt, up to the configured
number of re-drafts; after that the best attempt is answered as UNVERIFIED with every error.

A request without an output schema gets the arithmetic rule pack (hard) unless it turns that off
(`SolveRequest.disable_default_arithmetic`). The status the answer earns (VERIFIED, COMPUTATION_CHECKED, …) is
the selection's (`selection.earned_status`); the reason said with it is built in one place, `verdicts.status_reason`.

This module holds the order of the stages only: the calls are in `downstream`, the request's state in
`solve`, a round (streamed, whole or adaptive) and what happens to each draft in `rounds`, the stream's events in
`events`, the reading of verdicts in `verdicts`, the ranking in `selection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

import grpc
from opentelemetry import trace

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_api.refiner.v1 import refiner_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..core import metrics, telemetry
from ..core.requests import FINAL_TEXTS
from ..engines.interface import SamplingParams
from ..selection import Selection, select
from ..selection.consensus import Consensus, Step, consensus
from . import decisions, events, final_text, round_plan
from .downstream import Checks, Deadline, Downstream, StageError
from .drafter_load import Decision, LoadMonitor
from .events import Emit
from .learning.weight_learner import WeightLearner
from .learning.weight_store import FileStateStore, StateStore
from .learning.weights import DecisionFeatures
from .round_options import round_options
from .rounds import run_round
from .rounds.draft_stages import DraftStages, announce, candidate
from .settings import SchedulerSettings
from .solve import DraftState, Solve
from .verdicts import (
    computed_answer_line,
    effective_constraints,
    refinement_problem,
    status_reason,
    verifier_feedback,
)
from .watchdog.watchdog import Watchdog

tracer = trace.get_tracer("deliberate.scheduler")

# Hex characters of a request id the Scheduler makes up when the client gave none.
REQUEST_ID_HEX_CHARS = 16
# The contract's highest temperature, where raising a re-draft's stops. A request that set none is raised from the
# engines' built-in default (SamplingParams.temperature): the Scheduler cannot see a Drafter's own --temperature,
# so a Drafter run hotter than that default drafts a request's re-draft rounds cooler than its first.
MAX_TEMPERATURE = 2.0

STATUS = {
    "verified": pb.SOLVE_STATUS_VERIFIED,
    "computation_checked": pb.SOLVE_STATUS_COMPUTATION_CHECKED,
    "unchecked": pb.SOLVE_STATUS_UNCHECKED,
    "unverified": pb.SOLVE_STATUS_UNVERIFIED,
}
# The `status` label of deliberate_solves_total for an answered request: "verified", …, "failed".
STATUS_LABEL = {
    value: pb.SolveStatus.Name(value).removeprefix("SOLVE_STATUS_").lower() for value in pb.SolveStatus.values()
}


def steps_of(solve: Solve, state: DraftState) -> list[Step]:
    """The computations the Verifier reported for the draft. A structural duplicate worded differently from the
    draft whose verdict it shares has none: the shared lines would point into the other draft's text."""
    if state.duplicate_of and state.draft.text != solve.drafts[state.duplicate_of].draft.text:
        return []
    return [Step(c.key, c.line) for c in state.verdict.computations]


def drop_event(event: pb.SolveStreamResponse) -> None:
    """A unary Solve's event sink: nobody reads its events."""


def failure_status(error: BaseException) -> str:
    """The `status` label of a request that ended with an error: its gRPC code, lower case."""
    if isinstance(error, StageError):
        return error.code.name.lower()
    return "cancelled" if isinstance(error, asyncio.CancelledError) else "internal"


class Pipeline:
    def __init__(
        self,
        settings: SchedulerSettings,
        downstream: Downstream,
        state_store: StateStore | None = None,
        workload: LoadMonitor | None = None,
    ):
        self.settings = settings
        self.downstream = downstream
        self.stages = DraftStages(downstream, settings.verify_timeout_s)  # what happens to every draft
        self.state_store = state_store or FileStateStore(WeightLearner())  # the weights and pending decisions
        self.workload = workload  # the Drafters' load; None: N is the request's or the configured default
        metrics.REDRAFT_ROUNDS.add(0)  # the series exists (at 0) before the first re-draft

    @property
    def watchdog(self) -> Watchdog | None:
        return self.downstream.watchdog

    def draft_count(self, requested: int) -> Decision:
        if self.workload is not None:
            return self.workload.resolve(requested, self.settings.max_drafts)
        n = requested or self.settings.default_num_drafts
        reason = "requested by the client" if requested else "the configured default"
        return Decision(num_drafts=n, reason=reason, utilization=0.0)

    async def solve(self, request: pb.SolveRequest, deadline_s: float, emit: Emit | None) -> pb.SolveResponse:
        """One request through the stages. `emit`: the stream's event sink (SolveStream); None for a unary Solve."""
        options = round_options(request)  # the one reading of the request's round options, flat or grouped
        decision = self.draft_count(options.max_drafts)  # before the checks: a round without programs skips theirs
        # A decision's rule packs, converted once for both questions (a pack's catalog can be large).
        packs = decisions.rule_pack_constraints(request) if request.output_schema.strip() else []
        plan = round_plan.resolve(
            request,
            self.settings,
            decision,
            decisions.first_round_programs(request, decision.num_drafts, self.settings, packs, options),
            decisions.decision_kind(request, packs),
            self.downstream.spreads_drafts,
            options,
        )
        solve = Solve(
            request=request,
            request_id=request.request_id or uuid.uuid4().hex[:REQUEST_ID_HEX_CHARS],
            deadline=Deadline(deadline_s),
            checks=Checks(
                request.prompt,
                request.output_schema,
                effective_constraints(request, plan.programs > 0, plan.default_arithmetic),
                request.context,
            ),
            emit=emit or drop_event,
            final_text=plan.final_text,
            consensus_prefix=plan.consensus_prefix,
            thinking_trace=plan.thinking_trace,
            selection_policy=plan.selection,
        )
        span = trace.get_current_span()
        span.set_attribute(telemetry.REQUEST_ID, solve.request_id)
        span.set_attribute(telemetry.NUM_DRAFTS, plan.max_drafts)
        started = time.perf_counter()
        try:
            if request.constraints or request.output_schema:  # a constraint that does not compile is refused
                checked = await self.downstream.check_constraints(solve.checks, solve.deadline)  # before any token
                if checked.HasField("reference_plan"):
                    solve.reference_plan = checked.reference_plan
            await self.draft_rounds(solve, plan)
            response = await self.select_and_refine(solve)
        except BaseException as error:
            metrics.SOLVES.add(1, {"status": failure_status(error)})
            raise
        finally:
            for round_ in solve.open_streams:
                await round_.close()
            for state in solve.drafts.values():  # a failed stage leaves drafts unfinished
                if state.verification:
                    state.verification.cancel()
                if state.span.is_recording():
                    state.span.set_attribute(telemetry.DRAFT_OUTCOME, "abandoned")
                    state.span.end()
                    metrics.DRAFTS.add(1, {"outcome": "abandoned"})
            solve.timings.total = time.perf_counter() - started
            for stage, seconds in solve.timings.reached().items():
                metrics.STAGE_DURATION.record(seconds, {"stage": stage})
                span.set_attribute(telemetry.stage_seconds(stage), seconds)
            span.set_attribute(telemetry.ROUNDS, solve.rounds)
        metrics.SOLVES.add(1, {"status": STATUS_LABEL[response.status]})
        response.timings.CopyFrom(solve.timings.to_proto())
        response.trace_id = telemetry.current_trace_id()
        response.num_drafts = plan.max_drafts
        outcome = solve.round_outcome
        response.num_drafts_reason = "; ".join(filter(None, [plan.max_reason, outcome.note if outcome else ""]))
        response.round_plan.CopyFrom(self.plan_report(solve, plan))
        span.set_attributes(round_plan.span_attributes(response.round_plan))
        response.rounds = solve.rounds
        span.set_attribute(telemetry.SOLVE_STATUS, pb.SolveStatus.Name(response.status))
        return response

    @staticmethod
    def plan_report(solve: Solve, plan: round_plan.RoundPlan) -> pb.RoundPlan:
        """The plan as the response says it (all at once: one stage, whose drafts ended or were stopped early)."""
        if (outcome := solve.round_outcome) is not None:
            return round_plan.to_proto(plan, outcome.stages, outcome.drafts_started, outcome.stop_reason)
        first = sum(state.round == 0 for state in solve.drafts.values())
        return round_plan.to_proto(plan, 1 if first else 0, first, solve.early_stop.reason or "every draft ended")

    async def draft_rounds(self, solve: Solve, plan: round_plan.RoundPlan) -> None:
        """Rounds until a draft passes every hard rule or the re-drafts run out."""
        feedback, programs = "", plan.programs
        for round_ in range(self.settings.max_redrafts + 1):
            reason = plan.max_reason if round_ == 0 else f"re-draft {round_}: no draft passed every hard rule"
            solve.emit(events.round_started(round_, plan.max_drafts, reason, feedback))
            solve.rounds = round_ + 1
            attributes = {telemetry.REQUEST_ID: solve.request_id, telemetry.ROUND: round_}
            if round_:
                metrics.REDRAFT_ROUNDS.add(1)
                solve.redraft_feedback.append(feedback)
                attributes[telemetry.ROUND_FEEDBACK] = feedback
            with tracer.start_as_current_span("deliberate.round", attributes=attributes):
                verdicts = await self.draft_and_verify(solve, plan, round_, feedback, programs)
            if any(v.valid for v in verdicts) or not verdicts:
                return
            feedback = verifier_feedback(verdicts)
            programs = decisions.shifted_to_programs(
                solve.request, programs, plan.max_drafts, verdicts, programs_fixed=plan.programs_fixed
            )

    def round_sampling(self, request: pb.SolveRequest, round_: int) -> common_pb2.SamplingParams:
        """The client's sampling; a re-draft explores more, at a higher temperature."""
        sampling = common_pb2.SamplingParams()
        sampling.CopyFrom(request.sampling)
        if round_:
            base = (
                request.sampling.temperature if request.sampling.HasField("temperature") else SamplingParams.temperature
            )
            sampling.temperature = min(MAX_TEMPERATURE, base + self.settings.redraft_temperature_step * round_)
        return sampling

    async def draft_and_verify(
        self, solve: Solve, plan: round_plan.RoundPlan, round_: int, feedback: str, programs: int
    ) -> list[common_pb2.DraftVerdict]:
        """The round's drafts (`rounds.run_round`), each verified as soon as it arrives. Returns its verdicts."""
        request = solve.request
        drafter_request = drafter_service_pb2.GenerateDraftsRequest(
            request_id=solve.request_id,
            prompt=request.prompt,
            num_drafts=plan.max_drafts,
            strategies=request.strategy_hints if round_ == 0 else [],
            sampling=self.round_sampling(request, round_),
            output_schema=request.output_schema,
            round=round_,
            feedback=feedback,
            program_drafts=programs,
        )
        if programs and request.output_schema.strip():  # decision programs read the request's data as `ctx`
            drafter_request.context.update(decisions.decision_data_of(request))
            drafter_request.rule_packs.extend(c.rule_pack for c in request.constraints if c.HasField("rule_pack"))
        return await run_round(self.downstream, self.stages, solve, plan, drafter_request)

    async def select_and_refine(self, solve: Solve) -> pb.SolveResponse:
        started = time.perf_counter()
        if not solve.drafts:
            return pb.SolveResponse(
                request_id=solve.request_id,
                status=pb.SOLVE_STATUS_FAILED,
                status_reason="the drafter returned no drafts",
            )
        selection = await self.select(solve)
        span = trace.get_current_span()
        span.set_attribute(telemetry.SELECTION_POLICY, selection.policy)
        span.set_attribute(telemetry.FINAL_TEXT, solve.final_text)
        announce(solve, selection)
        best = solve.drafts[selection.selected[0].draft_id]
        trace_marker = final_text.trace_of(best, solve.thinking_trace)
        if trace_marker:
            solve.emit(events.thinking_trace(trace_marker))
        prefix = self.find_consensus(solve, selection) if solve.consensus_prefix else None
        solve.timings.select = time.perf_counter() - started

        started = time.perf_counter()
        if solve.final_text == "pass_through":  # streamed whole, right after selection
            worked = final_text.worked_draft(best, solve, selection.ranking)
            refined, refinement_lost = final_text.passed_through(worked, solve.request), ""
            solve.emit(events.refine_chunk(refined.text))
        else:
            refined, refinement_lost = await self.refine_or_best(solve, selection, prefix, best)
        solve.timings.refine = time.perf_counter() - started

        drafts = [state.draft for state in solve.drafts.values()]
        usage = common_pb2.TokenUsage(
            prompt_tokens=sum(d.usage.prompt_tokens for d in drafts) + refined.usage.prompt_tokens,
            completion_tokens=sum(d.usage.completion_tokens for d in drafts) + refined.usage.completion_tokens,
        )
        answer, reason = await self.answer_and_reason(solve, selection, best, refined, refinement_lost)
        response = pb.SolveResponse(
            request_id=solve.request_id,
            answer=answer,
            status=STATUS[selection.status],
            status_reason=reason,
            verified_by=selection.verified_by,
            drafts=solve.reports(),
            selected_draft_ids=[d.draft_id for d in selection.selected],
            thinking_trace=trace_marker,
            usage=usage,
            consensus_prefix=refined.consensus_prefix,
            refine_token_budget=refined.token_budget,
            refine_budget_reason=refined.budget_reason,
            early_stop=solve.early_stop,
            selection_policy=selection.policy,
            final_text=FINAL_TEXTS[solve.final_text],
            redraft_feedback=solve.redraft_feedback,
        )
        decisions.add_plan_quality(response, best.verdict, solve.reference_plan)
        return response

    async def refine_or_best(
        self, solve: Solve, selection: Selection, prefix: Consensus | None, best: DraftState
    ) -> tuple[refiner_service_pb2.RefineFinal, str]:
        """The Refiner's answer, or — the Refiner unavailable — the best draft's, with why ("" when refined)."""
        try:
            return await self.refine(solve, selection, prefix), ""
        except StageError as error:
            if error.code != grpc.StatusCode.UNAVAILABLE:
                raise
            # The drafts are verified and paid for: a lost Refiner costs the polish, not the answer.
            trace.get_current_span().add_event("refinement.unavailable", {"reason": error.message})
            return refiner_service_pb2.RefineFinal(text=decisions.best_draft_answer(best, solve.request)), error.message

    async def answer_and_reason(
        self,
        solve: Solve,
        selection: Selection,
        best: DraftState,
        refined: refiner_service_pb2.RefineFinal,
        refinement_lost: str,
    ) -> tuple[str, str]:
        """The answer the client gets — the refined one once it is re-verified, else the best draft — and the
        status reason (`verdicts.status_reason`)."""
        answer, replaced = refined.text, ""
        if refinement_lost:
            replaced = f"refinement unavailable ({refinement_lost}); answering with the best draft #{best.draft.index}"
        elif selection.status != "unverified" and solve.final_text != "pass_through":  # passed through: checked
            broken, checked = await self.recheck_refined(solve, refined, best.verdict)
            if broken:  # the refined answer may never be worse than the best verified draft
                answer = decisions.best_draft_answer(best, solve.request)
                replaced = f"refinement rejected ({broken}); answering with the best draft #{best.draft.index}"
            elif line := computed_answer_line(checked):  # a refined program: the value it printed, streamed last
                answer += line
                solve.emit(events.refine_chunk(line))
        return answer, status_reason(selection, solve.rounds, solve.verdicts(), best.verdict, replaced)

    async def select(self, solve: Solve) -> Selection:
        """Ranks every draft under the plan's policy (the request's, else the deployment's for its round) with the
        weights for the current load, and records the decision for feedback."""
        load = self.workload.current().utilization if self.workload is not None else 0.0
        weights = self.state_store.weights_for_load(load)
        timeout_s = self.settings.verify_timeout_s
        selection = select(
            [candidate(s, timeout_s) for s in solve.drafts.values()],
            policy=solve.selection_policy,
            weights=weights.vector(),
            max_selected=self.settings.max_selected,
        )
        for draft_id, state in solve.drafts.items():
            state.signals = selection.signals[draft_id]
            state.final = selection.finals[draft_id]
            state.weights = weights
        best = selection.signals[selection.selected[0].draft_id]
        await self.state_store.record(
            solve.request_id,
            DecisionFeatures(best["score"], best["agreement"], best["latency"], best["answer_share"]),
        )
        return selection

    async def recheck_refined(
        self, solve: Solve, refined: refiner_service_pb2.RefineFinal, best: common_pb2.DraftVerdict
    ) -> tuple[str, common_pb2.DraftVerdict]:
        """Verifies the refined answer against the request's hard rules; returns why it may not replace the
        best draft ("" when it may) and its verdict. An answer that cannot be checked counts as failing: the
        verified draft is the safe answer."""
        draft = common_pb2.Draft(
            id=f"{solve.request_id}-refined", text=refined.text, finish_reason=refined.finish_reason
        )
        try:
            verdict = await self.downstream.verify(
                solve.request_id, draft, solve.checks, solve.deadline, "re-verification"
            )
        except StageError as error:
            if error.code == grpc.StatusCode.DEADLINE_EXCEEDED and solve.deadline.left() <= 0:
                raise
            return f"could not be re-verified: {error.message}", common_pb2.DraftVerdict()
        trace.get_current_span().add_event("refined.verified", {telemetry.DRAFT_VALID: verdict.valid})
        return refinement_problem(verdict, best), verdict

    def find_consensus(self, solve: Solve, selection: Selection) -> Consensus:
        """The opening enough drafts agree on, by lines or by the computations the Verifier reported, in the
        wording of the best-ranked draft that shares it; streamed at once, before refinement starts."""
        ranked = [solve.drafts[draft_id] for draft_id in selection.ranking]
        attributes = {telemetry.REQUEST_ID: solve.request_id}
        with tracer.start_as_current_span("deliberate.consensus", attributes=attributes) as span:
            found = consensus(
                [s.draft.text for s in ranked],
                self.settings.consensus_min_support,
                steps=[steps_of(solve, s) for s in ranked],
            )
            span.set_attributes(
                {
                    "deliberate.consensus.basis": found.basis or "none",
                    "deliberate.consensus.lines": found.lines,
                    "deliberate.consensus.computations": found.computations,
                    "deliberate.consensus.support": len(found.supporters),
                    "deliberate.consensus.chars": len(found.text),
                }
            )
            if found.text:
                ids = [s.draft.id for s in ranked]
                span.set_attribute("deliberate.consensus.source_draft_id", ids[found.source])
                solve.emit(events.consensus_prefix(found, ids))
                span.add_event("streamed")
        return found

    async def refine(
        self, solve: Solve, selection: Selection, prefix: Consensus | None
    ) -> refiner_service_pb2.RefineFinal:
        """`prefix`: the Scheduler's consensus, handed to the Refiner as is; None where the solve has no consensus
        prefix (`--consensus-prefix`), which the Refiner is then told, lest it find one by lines itself."""
        request = solve.request
        chosen = [solve.drafts[d.draft_id] for d in selection.selected]
        refine_request = refiner_service_pb2.RefineRequest(
            request_id=solve.request_id,
            prompt=request.prompt,
            selected=[
                refiner_service_pb2.VerifiedDraft(draft=decisions.as_plan(s, request), verdict=s.verdict)
                for s in chosen
            ],
            all_drafts=[decisions.as_plan(state, request) for state in solve.drafts.values() if state.abort is None],
            sampling=request.refine_sampling,
            output_schema=request.output_schema,
            disable_thinking_trace=True,  # the Scheduler makes the marker, whichever way the text is made
            disable_consensus_prefix=not solve.consensus_prefix,  # the plan's: the request's switch and the way
        )
        if prefix is not None:
            refine_request.consensus_prefix = prefix.text
        final = None
        async with contextlib.aclosing(self.downstream.refine(refine_request, solve.deadline)) as stream:
            async for item in stream:
                if isinstance(item, str):
                    solve.emit(events.refine_chunk(item))
                else:
                    final = item
        return final
