"""What the Scheduler adds for a decision (a request with an output schema): the data its programs read as `ctx`,
and a re-draft round's mix moved toward programs when prose failed. Pure functions over contract messages."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Literal

from google.protobuf import json_format

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..core.convert import struct_to_dict
from ..core.limits import MAX_DECISION_DATA_BYTES
from ..decisions.packs import decision_data, solves_exactly
from ..selection.final_text import with_plain_final_line
from .round_options import round_options
from .settings import SchedulerSettings
from .verdicts import DEFAULT_PROGRAM, with_computed_answer


def first_round_programs(
    request: pb.SolveRequest,
    num_drafts: int,
    settings: SchedulerSettings,
    packs: list[SimpleNamespace] | None = None,
    options: pb.RoundOptions | None = None,
) -> int:
    """How many of the first round's drafts are programs: the request's count (at most N), else the deployment's
    (at most N - 1: one draft stays prose) — for a structured answer its decision programs'
    (`--decision-program-drafts`, or `--bounded-decision-program-drafts` where a rule pack solves the question
    exactly), none where the request's data is too large for the sandbox. `packs`: `rule_pack_constraints` of the
    request, `options` its round options (`round_options`), where the caller has them already."""
    options = round_options(request) if options is None else options
    if options.HasField("program_drafts"):
        return min(options.program_drafts, num_drafts)
    if not request.output_schema.strip():
        return min(settings.program_drafts, num_drafts - 1)
    if packs is None:
        packs = rule_pack_constraints(request)  # converted once: the catalog in a pack's params can be large
    if decision_data_bytes(request, packs) > MAX_DECISION_DATA_BYTES:
        return 0
    if solves_exactly(packs):
        return min(settings.bounded_decision_program_drafts, num_drafts - 1)
    return min(settings.decision_program_drafts, num_drafts - 1)


def decision_kind(
    request: pb.SolveRequest, packs: list[SimpleNamespace] | None = None
) -> Literal["", "bounded", "unbounded"]:
    """What ends a staged round of this request: "" (a free-text question: its drafts agreeing), "bounded" (a plan
    at the optimum of a pack that solves the question exactly), "unbounded" (any plan that passes every rule).
    `packs`: as for `first_round_programs`."""
    if not request.output_schema.strip():
        return ""
    return "bounded" if solves_exactly(rule_pack_constraints(request) if packs is None else packs) else "unbounded"


def decision_data_of(request: pb.SolveRequest, packs: list[SimpleNamespace] | None = None) -> dict:
    """What the request's decision programs read as `ctx` — the object the Verifier binds (`decision_data`): the
    context, plus the data params of its rule packs (the ad pack's `catalog`). `packs`: `rule_pack_constraints`
    of the request, where the caller has them already."""
    if packs is None:
        packs = rule_pack_constraints(request)
    return decision_data(struct_to_dict(request.context), packs)


def rule_pack_constraints(request: pb.SolveRequest) -> list[SimpleNamespace]:
    """The request's rule packs as the Verifier's pack functions take them (kind, source, params)."""
    return [
        SimpleNamespace(kind="rule_pack", source=c.rule_pack, params=struct_to_dict(c.params))
        for c in request.constraints
        if c.WhichOneof("kind") == "rule_pack"
    ]


def decision_data_bytes(request: pb.SolveRequest, packs: list[SimpleNamespace] | None = None) -> int:
    """The serialized size of `decision_data_of(request)`, as the Drafter's limit on its `context` reads it."""
    data = decision_data_of(request, packs)
    return json_format.ParseDict(data, pb.SolveRequest().context).ByteSize() if data else 0


def shifted_to_programs(
    request: pb.SolveRequest,
    programs: int,
    num_drafts: int,
    verdicts: Sequence[common_pb2.DraftVerdict] = (),
    *,
    programs_fixed: bool,
) -> int:
    """The next re-draft round's programs of a decision whose round failed (no draft passed): half of the prose
    drafts, rounded up, become programs — the seed's "higher weight for simulator calls" — unless the round's
    programs all failed to run to a plan (no `program` rule passed in `verdicts`): programs that crash or run past
    the budget are no better a bet than prose told its numbers (recorded: promotion rounds of programs only, every
    one cut off). A request that set its own count (`programs_fixed`, the plan's), and a free-text question, keep
    theirs."""
    if not request.output_schema.strip() or programs_fixed:
        return programs
    if programs and not any(program_ran(v) for v in verdicts):
        return programs
    prose = num_drafts - programs
    return min(num_drafts, programs + math.ceil(prose / 2))


def program_ran(verdict: common_pb2.DraftVerdict) -> bool:
    """The draft's program ran to its end and printed a plan (the `program` rule passed). The rule's id is the
    program pack's name; `verifier.program` itself is not imported here (the Scheduler's image lacks its parsers)."""
    return any(r.rule_id == DEFAULT_PROGRAM.rule_pack and r.passed for r in verdict.rule_results)


def add_plan_quality(
    response: pb.SolveResponse, best: common_pb2.DraftVerdict, reference: common_pb2.ReferencePlan | None
) -> None:
    """The answer's plan quality (its draft's, once the answer is not UNVERIFIED), and only beside an UNVERIFIED
    answer the plan a rule pack computed itself — never as the answer."""
    if response.status == pb.SOLVE_STATUS_UNVERIFIED:
        if reference is not None:
            response.reference_plan.CopyFrom(reference)
    elif best.HasField("quality"):
        response.quality.CopyFrom(best.quality)


def best_draft_answer(state, request: pb.SolveRequest) -> str:
    """The best draft as the answer, where no refined one replaces it: a decision program's plan (`as_plan`), any
    other program with the value it printed, else the draft's text ending with its answer as a plain final line."""
    plan = as_plan(state, request)
    if plan is not state.draft:
        return plan.text
    if state.draft.kind == "program" or request.output_schema.strip():
        return with_computed_answer(state.draft.text, state.verdict)
    return with_plain_final_line(state.draft.text, state.verdict.extracted_answer if state.verdict else "")


def as_plan(state, request: pb.SolveRequest) -> common_pb2.Draft:
    """A decision program's draft as the Refiner reads it: the JSON plan its program printed (the verdict's
    answer), not the program — the answer of a structured request is the plan. Other drafts as they are."""
    draft, verdict = state.draft, state.verdict
    if not request.output_schema.strip() or draft.kind != "program" or verdict is None or not verdict.extracted_answer:
        return draft
    plan = common_pb2.Draft()
    plan.CopyFrom(draft)
    plan.text = json.dumps(json.loads(verdict.extracted_answer), indent=2)
    plan.kind = "prose"
    return plan
