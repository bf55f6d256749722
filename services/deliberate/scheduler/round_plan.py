"""A request's plan, resolved once at the Scheduler's edge from its round options (`round_options`), the settings
and the load (docs/scheduler.md, "A request's plan"): how its first round drafts — all at once, adaptively, or as
the cascade — with its maximum of drafts, its programs, what stops it early, what checks it, what ranks its drafts
and how its answer is written.

The pipeline and the rounds read the plan, not the request's options; the response (`RoundPlan`) and the request's
span say what it was and why the round stopped where it did.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Literal

from google.protobuf import json_format

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..core import telemetry
from ..core.requests import FINAL_TEXTS
from ..selection.adaptive import PROGRAM, AdaptivePolicy
from .drafter_load import Decision
from .round_options import round_options
from .settings import SchedulerSettings

Way = Literal["all_at_once", "adaptive", "cascade"]
WAYS: dict[int, Way] = {
    pb.DRAFT_COUNT_ALL_AT_ONCE: "all_at_once",
    pb.DRAFT_COUNT_ADAPTIVE: "adaptive",
    pb.DRAFT_COUNT_CASCADE: "cascade",
}
WAYS_TO_TEXT = {value: way for way, value in FINAL_TEXTS.items()}  # RoundOptions.final_text → the way's name
# At this controlled utilization (the load monitor's "saturated" band) a cascade runs its first stage only: its
# escalation shrinks before its first stage does.
SATURATED = 0.85


@dataclass(frozen=True)
class Stopping:
    """What stops a round started all at once early (docs/scheduler.md, "Early stopping"); a staged round stops on
    its policy's rule instead."""

    streaming: bool  # verify while drafting; abort a draft at its first failed hard rule
    quorum: int  # agreeing valid drafts that end the round; 0: wait for every draft
    replace: bool  # start a replacement for an aborted draft
    # The quorum is the default one (the request named none): a decision whose plans are scored against a bound then
    # ends on a plan at the bound rather than on agreement (`decision_reason`).
    default_quorum: bool = False
    cross_modal: bool = False  # a valid prose draft and a valid program agreeing end the round too
    confidence_stop: bool = False  # stop a draft whose token confidence falls below its kind's floor
    # The deployment's floors per kind (--confidence-floors); empty: those the Drafter sends, its model's.
    confidence_floors: Mapping[str, float] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.streaming or self.quorum > 0 or self.confidence_stop


def default_quorum(num_drafts: int) -> int:
    """Half the round's drafts, rounded up, and at least two: one draft alone agrees with nobody."""
    return min(num_drafts, max(2, math.ceil(num_drafts / 2)))


def stopping_of(
    options: pb.RoundOptions,
    num_drafts: int,
    cross_modal: bool = False,
    confidence_stop: bool = False,
    confidence_floors: Mapping[str, float] | None = None,
) -> Stopping:
    """`cross_modal` (the deployment's --cross-modal-quorum) joins the default quorum only: a request that names
    its quorum gets exactly that many agreeing drafts. `confidence_stop` (the deployment's --confidence-stop) holds
    where the request does not say; `confidence_floors` are the deployment's (--confidence-floors)."""
    named_quorum = options.HasField("quorum") and options.quorum > 0
    quorum = options.quorum if options.HasField("quorum") else default_quorum(num_drafts)
    streaming = said(options, "streaming_verification", default=True)
    quorum_by_default = quorum > 0 and not named_quorum
    return Stopping(
        streaming=streaming,
        quorum=quorum,
        replace=streaming and said(options, "replace_aborted_drafts", default=False),
        cross_modal=cross_modal and quorum_by_default,
        default_quorum=quorum_by_default,
        confidence_stop=said(options, "confidence_stop", default=confidence_stop),
        confidence_floors=dict(confidence_floors or {}),
    )


def said(options: pb.RoundOptions, name: str, default: bool) -> bool:
    """An optional switch of the options: its value where the request set it, else `default`."""
    return getattr(options, name) if options.HasField(name) else default


@dataclass(frozen=True)
class RoundPlan:
    way: Way
    policy: AdaptivePolicy | None  # the cascade's or adaptive round's; None all at once
    max_drafts: int  # drafts the first round may start
    max_reason: str
    programs: int  # of those, programs (the round's last ones all at once; in the policy's order otherwise)
    selection: str  # the selection policy that ranks the request's drafts
    # A decision's round ends on a plan, not on agreement: "bounded" at a plan that reaches the pack's optimum,
    # "unbounded" at the first plan that passes every rule; "" for a free-text question.
    decision: Literal["", "bounded", "unbounded"] = ""
    stopping: Stopping = Stopping(streaming=True, quorum=0, replace=False)  # of a round started all at once
    default_arithmetic: bool = True  # a question without an output schema gets the arithmetic pack
    final_text: str = "refine"  # how the answer is written (`FINAL_TEXTS`' names)
    consensus_prefix: bool = False  # refinement starts from the drafts' consensus prefix
    thinking_trace: bool = True  # a thinking-trace marker is made
    programs_fixed: bool = False  # the client set its programs: re-draft rounds keep them

    @property
    def staged(self) -> bool:
        return self.policy is not None


@cache
def parsed_policy(name: str) -> AdaptivePolicy:
    """Parsed once per name (the settings validated it at start-up), not once per request."""
    return AdaptivePolicy.parse(name)


def resolve(
    request: pb.SolveRequest,
    settings: SchedulerSettings,
    decision: Decision,
    programs_all_at_once: int,
    decision_kind: Literal["", "bounded", "unbounded"],
    spreads_drafts: bool,
    options: pb.RoundOptions | None = None,
) -> RoundPlan:
    """The request's plan. `decision`: the N the client or the load chose; `programs_all_at_once`: the programs a
    round of that N would hold (`decisions.first_round_programs`); `spreads_drafts`: several Drafter replicas, whose
    rounds start all at once (a staged round runs on one Drafter call per stage); `options`: the request's round
    options (`round_options`), where the caller has them already."""
    if options is None:
        options = round_options(request)
    drafting = drafting_of(options, settings, decision, programs_all_at_once, decision_kind, spreads_drafts)
    final_text = WAYS_TO_TEXT.get(options.final_text, settings.final_text)
    return replace(
        drafting,
        stopping=stopping_of(
            options,
            drafting.max_drafts,
            settings.cross_modal_quorum,
            settings.confidence_stop,
            settings.confidence_floors_of_kind,
        ),
        default_arithmetic=said(options, "default_arithmetic", default=True),
        final_text=final_text,
        # A JSON object does not start with the drafts' reasoning lines: no prefix for a structured answer.
        consensus_prefix=final_text == "prefix"
        and said(options, "consensus_prefix", default=True)
        and not request.output_schema.strip(),
        thinking_trace=said(options, "thinking_trace", default=True),
        programs_fixed=options.HasField("program_drafts"),
    )


def drafting_of(
    options: pb.RoundOptions,
    settings: SchedulerSettings,
    decision: Decision,
    programs_all_at_once: int,
    decision_kind: Literal["", "bounded", "unbounded"],
    spreads_drafts: bool,
) -> RoundPlan:
    """How the first round drafts: its way, policy, maximum, programs and selection."""
    way = WAYS.get(options.draft_count) or settings.draft_count
    selection = options.selection_policy or settings.selection_policy
    if way == "all_at_once" or spreads_drafts:
        n, why = decision.num_drafts, decision.reason
        return RoundPlan("all_at_once", None, n, why, programs_all_at_once, selection, decision_kind)
    if way == "adaptive":
        policy = parsed_policy(settings.adaptive_policy)
        n, why = decision.num_drafts, decision.reason
        return RoundPlan(way, policy, n, why, programs_all_at_once, selection, decision_kind)
    if not decision_kind:  # a free-text cascade ends on agreement: its answer is the one its drafts agree on
        selection = options.selection_policy or settings.cascade_selection_policy
    policy = parsed_policy(settings.decision_cascade_policy if decision_kind else settings.cascade_policy)
    most, reason = cascade_maximum(options, settings, decision, policy)
    programs = policy.order[:most].count(PROGRAM)
    if options.HasField("program_drafts"):
        programs = min(options.program_drafts, most)
    elif programs_all_at_once == 0:  # no programs for this request (its data too large for the sandbox)
        programs = 0
    return RoundPlan(way, policy, most, reason, programs, selection, decision_kind)


def cascade_maximum(
    options: pb.RoundOptions, settings: SchedulerSettings, decision: Decision, policy: AdaptivePolicy
) -> tuple[int, str]:
    """How many drafts a cascade may start, and why: the client's num_drafts where it set one; the first stage
    alone once the Drafters are saturated; else --cascade-max-drafts (never past the policy's order)."""
    longest = len(policy.order)
    if options.max_drafts:
        most = min(options.max_drafts, settings.max_drafts, longest)
        return most, f"at most {most} drafts: {options.max_drafts} requested by the client"
    if decision.utilization >= SATURATED:
        return policy.start, f"first stage only ({policy.start} drafts): {decision.reason}"
    most = min(settings.cascade_max_drafts, settings.max_drafts, longest)
    return most, f"at most {most} drafts (--cascade-max-drafts)"


def span_attributes(said: pb.RoundPlan) -> dict[str, str]:
    """The request span's words on its plan: why the round stopped, and the whole plan as the response says it."""
    return {
        telemetry.ROUND_STOP_REASON: said.stop_reason,
        telemetry.ROUND_PLAN: json_format.MessageToJson(said, indent=None),
    }


def to_proto(plan: RoundPlan, stages: int, drafts_started: int, stop_reason: str) -> pb.RoundPlan:
    stopping = plan.stopping
    return pb.RoundPlan(
        way=plan.way,
        policy=plan.policy.name if plan.policy else "",
        max_drafts=plan.max_drafts,
        max_drafts_reason=plan.max_reason,
        stages=stages,
        drafts_started=drafts_started,
        stop_reason=stop_reason,
        options=pb.RoundOptions(
            draft_count=next(value for value, way in WAYS.items() if way == plan.way),
            max_drafts=plan.max_drafts,
            program_drafts=plan.programs,
            quorum=plan.policy.quorum if plan.policy else stopping.quorum,
            streaming_verification=stopping.streaming,
            replace_aborted_drafts=stopping.replace,
            confidence_stop=stopping.confidence_stop,
            default_arithmetic=plan.default_arithmetic,
            selection_policy=plan.selection,
            final_text=FINAL_TEXTS[plan.final_text],
            consensus_prefix=plan.consensus_prefix,
            thinking_trace=plan.thinking_trace,
        ),
        decision=plan.decision,
    )
