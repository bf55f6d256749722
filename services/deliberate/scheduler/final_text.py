"""How the selected drafts become the text a person reads (the plan's `final_text`, `--final-text`): the best
draft passed through, a worked solution the Refiner writes, or the Refiner continuing the drafts' consensus prefix;
and the thinking-trace marker that goes beside the answer (docs/refiner.md, "Three ways to the final text")."""

from __future__ import annotations

from deliberate_api.refiner.v1 import refiner_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..selection import answer_key
from ..selection.final_text import passed_and_failed, thinking_trace
from . import decisions
from .solve import DraftState, Solve


def trace_of(best: DraftState, wanted: bool) -> str:
    """The thinking-trace marker of the best selected draft; "" where the request's plan turns it off."""
    if not wanted or best.verdict is None:
        return ""
    passed, failed = passed_and_failed(best.verdict.rule_results)
    return thinking_trace(best.draft.index, best.verdict.score, passed, failed)


def passed_through(best: DraftState, request: pb.SolveRequest) -> refiner_service_pb2.RefineFinal:
    """The best draft as the final text, no Refiner call: its answer line in plain text (`best_draft_answer`)."""
    return refiner_service_pb2.RefineFinal(text=decisions.best_draft_answer(best, request))


def worked_draft(best: DraftState, solve: Solve, ranking: tuple[str, ...]) -> DraftState:
    """The draft whose text a person reads: a worked answer, not code. Where the best draft is a free-text question's
    program and a valid prose draft reached the same answer, the best-ranked such prose draft (its steps, its plain
    final line); the program stays the evidence (`verified_by`, the drafts). Otherwise the best draft itself."""
    if best.draft.kind != "program" or solve.request.output_schema.strip() or not best.verdict.valid:
        return best
    key = answer_key(best.verdict.extracted_answer)
    for draft_id in ranking if key else ():
        state = solve.drafts[draft_id]
        verdict = state.verdict
        if (state.draft.kind or "prose") != "prose" or verdict is None or not verdict.valid:
            continue
        if answer_key(verdict.extracted_answer) == key:
            return state
    return best
