"""The text a person reads: where a program and a prose draft agree, the prose draft's worked steps, the program
kept as evidence; a program that nobody agrees with, a decision's plan, or a prose answer stays as it is."""

from __future__ import annotations

from opentelemetry.trace import INVALID_SPAN

from deliberate.scheduler.downstream import Checks, Deadline
from deliberate.scheduler.final_text import worked_draft
from deliberate.scheduler.solve import DraftState, Solve
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb


def state(draft_id: str, kind: str, answer: str, valid: bool = True) -> DraftState:
    draft = common_pb2.Draft(id=draft_id, kind=kind, text=f"{kind} text")
    verdict = common_pb2.DraftVerdict(draft_id=draft_id, valid=valid, extracted_answer=answer)
    return DraftState(draft, 0, INVALID_SPAN, verdict=verdict)


def solve_of(*states: DraftState, schema: str = "") -> Solve:
    request = pb.SolveRequest(prompt="q", output_schema=schema)
    solve = Solve(request, "r", Deadline(60), Checks("q", schema, [], request.context), emit=lambda event: None)
    solve.drafts = {s.draft.id: s for s in states}
    return solve


def test_a_program_agreeing_with_a_valid_prose_draft_is_read_as_the_best_ranked_agreeing_prose():
    program, wrong = state("c", "program", "72"), state("s1", "prose", "70")
    invalid, right = state("s2", "prose", "72", valid=False), state("s3", "prose", "$72.00")
    solve = solve_of(program, wrong, invalid, right)
    assert worked_draft(program, solve, ("c", "s1", "s2", "s3")) is right


def test_the_best_draft_stays_where_no_valid_prose_draft_agrees_or_it_is_not_a_free_text_program():
    program = state("c", "program", "72")
    assert worked_draft(program, solve_of(program, state("s", "prose", "70")), ("c", "s")) is program
    prose = state("s", "prose", "72")
    assert worked_draft(prose, solve_of(prose, state("c", "program", "72")), ("s", "c")) is prose
    plan = state("c", "program", '{"x": 1}')
    decision = solve_of(plan, state("s", "prose", '{"x": 1}'), schema='{"type": "object"}')
    assert worked_draft(plan, decision, ("c", "s")) is plan
