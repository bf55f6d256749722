"""Program drafts (issue 24, item 1): the Drafter's plans and prompts with a prefilled ```python fence, the kind on
every draft, the limits on `program_drafts`, and the Scheduler's count and replacements."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from deliberate.core.requests import InvalidArgument
from deliberate.drafter.limits import GENERATE_DRAFTS
from deliberate.drafter.prompts import (
    DEFAULT_STRATEGIES,
    PROGRAM_PREFILL,
    PROGRAM_STRATEGIES,
    PROGRAM_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    draft_plans,
    draft_user_message,
    program_user_message,
    strategies_for,
)
from deliberate.drafter.server import DrafterServicer
from deliberate.drafter.settings import DrafterSettings
from deliberate.engines.base import Batch, Completion, Engine, TextDelta
from deliberate.scheduler.decisions import first_round_programs
from deliberate.scheduler.limits import SOLVE
from deliberate.scheduler.replicas import DrafterReplicas
from deliberate.scheduler.round_plan import Stopping
from deliberate.scheduler.rounds.streamed import StreamedRound
from deliberate.scheduler.settings import SchedulerSettings
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

QUESTION = "A shop sells pens at 3 dollars each. How much do 7 pens cost?"
PROGRAM_TAIL = "pens = 7\nprice = 3\nanswer = pens * price\nprint(answer)\n```"

# ------------------------------------------------------------------------------------------------------ the plans


def test_without_programs_the_plans_are_today_s_prose_drafts():
    for round_ in (0, 1):
        plans = draft_plans(5, ["Be greedy."], round_)
        assert [p.strategy for p in plans] == strategies_for(5, ["Be greedy."], round_)
        assert {p.kind for p in plans} == {"prose"}


def test_the_last_drafts_are_programs_and_the_prose_keep_their_indexes_and_strategies():
    plans = draft_plans(5, [], program_drafts=2)
    assert [p.kind for p in plans] == ["prose"] * 3 + ["program"] * 2
    assert [p.strategy for p in plans[:3]] == strategies_for(5, [])[:3]
    assert [p.strategy for p in plans[3:]] == list(PROGRAM_STRATEGIES[:2])
    assert all(p.kind == "program" for p in draft_plans(3, [], program_drafts=3))
    assert len(draft_plans(3, [], program_drafts=9)) == 3  # never more programs than drafts


def test_program_strategies_are_distinct_and_differ_between_rounds_and_replacements():
    assert len(set(PROGRAM_STRATEGIES)) == len(PROGRAM_STRATEGIES)
    assert not set(PROGRAM_STRATEGIES) & set(DEFAULT_STRATEGIES)
    round0 = [p.strategy for p in draft_plans(5, [], 0, program_drafts=3)[2:]]
    round1 = [p.strategy for p in draft_plans(5, [], 1, program_drafts=3)[2:]]
    assert len(set(round0)) == 3 and round0 != round1
    replacement = draft_plans(1, [], 0, first_index=5, program_drafts=1)
    assert replacement[0].kind == "program" and replacement[0].strategy not in round0


def test_the_program_prompt_asks_for_a_brief_program_that_prints_the_answer():
    message = program_user_message(QUESTION, PROGRAM_STRATEGIES[0], feedback="program failed: NameError")
    assert QUESTION in message and PROGRAM_STRATEGIES[0] in message and "NameError" in message
    assert "print(answer)" in message and "```python" in message and "Final answer" not in message
    assert "no imports" in PROGRAM_SYSTEM_PROMPT and "print(answer)" in PROGRAM_SYSTEM_PROMPT
    assert PROGRAM_PREFILL == "```python\n"


# ------------------------------------------------------------------------------------------ the Drafter's drafts


class ScriptedEngine(Engine):
    """Answers every prompt with a program's continuation (no opening fence, as real engines return only what
    they generated), in two deltas, and keeps the prompts it was given."""

    name = "scripted"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def format_chat(self, system: str, user: str) -> str:
        return f"<system>{system}<user>{user}<assistant>"

    @classmethod
    def from_settings(cls, model, threads, settings) -> ScriptedEngine:
        return cls()

    def decode(self, batch: Batch) -> list[Completion]:
        self.prompts = list(batch.prompts)
        completions = []
        for index, _ in enumerate(batch.prompts):
            half = len(PROGRAM_TAIL) // 2
            batch.emit(TextDelta(index, PROGRAM_TAIL[:half]))
            batch.emit(TextDelta(index, PROGRAM_TAIL[half:]))
            completion = Completion(index, PROGRAM_TAIL, 10, 12, "stop", 0.01)
            batch.emit(completion)
            completions.append(completion)
        return completions


class Context:
    def add_done_callback(self, callback) -> None:
        pass

    async def abort(self, code, details):
        raise AssertionError(f"aborted: {code} {details}")


def drafter() -> tuple[DrafterServicer, ScriptedEngine]:
    engine = ScriptedEngine()
    return DrafterServicer(DrafterSettings(), engine), engine


def generate(request: drafter_service_pb2.GenerateDraftsRequest) -> tuple[list[common_pb2.Draft], list[str]]:
    servicer, engine = drafter()

    async def run() -> list[common_pb2.Draft]:
        return [r.draft async for r in servicer.GenerateDrafts(request, Context())]

    drafts = asyncio.run(run())
    return sorted(drafts, key=lambda d: d.index), engine.prompts


def test_a_program_draft_s_prompt_ends_with_an_opened_fence_and_its_text_starts_with_it():
    request = drafter_service_pb2.GenerateDraftsRequest(request_id="r", prompt=QUESTION, num_drafts=3, program_drafts=1)
    drafts, prompts = generate(request)
    assert [d.kind for d in drafts] == ["prose", "prose", "program"]
    program, prose = drafts[2], drafts[0]
    assert prompts[2].endswith("<assistant>" + PROGRAM_PREFILL)
    assert prompts[2].startswith(f"<system>{PROGRAM_SYSTEM_PROMPT}<user>")
    assert program.text == PROGRAM_PREFILL + PROGRAM_TAIL and program.strategy == PROGRAM_STRATEGIES[0]
    assert prose.text == PROGRAM_TAIL and prompts[0].endswith("<assistant>")  # prose: no prefill
    assert prompts[0] == f"<system>{SYSTEM_PROMPT}<user>{draft_user_message(QUESTION, prose.strategy, None)}<assistant>"


def test_without_program_drafts_the_prompts_are_unchanged():
    request = drafter_service_pb2.GenerateDraftsRequest(request_id="r", prompt=QUESTION, num_drafts=3)
    drafts, prompts = generate(request)
    assert [d.kind for d in drafts] == ["prose"] * 3
    expected = [draft_user_message(QUESTION, s, None) for s in strategies_for(3, [])]
    assert prompts == [f"<system>{SYSTEM_PROMPT}<user>{m}<assistant>" for m in expected]


def test_streamed_deltas_of_a_program_add_up_to_its_text_fence_included():
    servicer, _ = drafter()
    generate_request = drafter_service_pb2.GenerateDraftsRequest(
        request_id="r", prompt=QUESTION, num_drafts=2, program_drafts=1
    )

    async def requests():
        yield drafter_service_pb2.StreamDraftsRequest(generate=generate_request)

    async def run():
        return [m async for m in servicer.StreamDrafts(requests(), Context())]

    messages = asyncio.run(run())
    streamed: dict[int, str] = {}
    for message in messages:
        if message.HasField("delta"):
            streamed[message.delta.index] = streamed.get(message.delta.index, "") + message.delta.text
    finished = {m.draft.index: m.draft for m in messages if m.HasField("draft")}
    assert streamed[1].startswith("```python\n") and not streamed[0].startswith("```")
    assert all(streamed[i] == finished[i].text for i in (0, 1))
    assert finished[1].kind == "program"


# ------------------------------------------------------------------------------------------------------ the limits


def refused(limits, request, settings) -> str:
    with pytest.raises(InvalidArgument) as raised:
        limits.check(request, settings)
    return str(raised.value)


def test_the_drafter_refuses_more_programs_than_drafts_naming_the_field():
    def request(**fields):
        return drafter_service_pb2.GenerateDraftsRequest(prompt="q", **fields)

    GENERATE_DRAFTS.check(request(num_drafts=3, program_drafts=3), DrafterSettings())
    message = refused(GENERATE_DRAFTS, request(num_drafts=3, program_drafts=4), DrafterSettings())
    assert message == "program_drafts: must be at most num_drafts (3), got 4"
    assert refused(GENERATE_DRAFTS, request(num_drafts=8, program_drafts=9), DrafterSettings()).startswith(
        "program_drafts: must be in [0, 8], got 9"
    )
    decision = request(num_drafts=3, program_drafts=1, output_schema='{"type": "object"}')
    GENERATE_DRAFTS.check(decision, DrafterSettings())  # a decision program: it reads `context`, prints the plan
    decision.context.update({"rows": ["x" * 1000] * 300})
    assert refused(GENERATE_DRAFTS, decision, DrafterSettings()).startswith("context: has 30")


def test_the_scheduler_refuses_more_programs_than_the_drafts_asked_for_naming_the_field():
    settings = SchedulerSettings()
    SOLVE.check(pb.SolveRequest(prompt="q", num_drafts=3, program_drafts=3), settings)
    SOLVE.check(pb.SolveRequest(prompt="q", program_drafts=8), settings)  # N is the Scheduler's: clamped to it
    message = refused(SOLVE, pb.SolveRequest(prompt="q", num_drafts=3, program_drafts=4), settings)
    assert message == "program_drafts: must be at most num_drafts (3), got 4"
    assert refused(SOLVE, pb.SolveRequest(prompt="q", program_drafts=9), settings).startswith(
        "program_drafts: must be in [0, 8], got 9"
    )
    decision = pb.SolveRequest(prompt="q", program_drafts=1, output_schema='{"type": "object"}')
    SOLVE.check(decision, settings)  # decision programs
    decision.context.update({"rows": ["x" * 1000] * 300})
    assert refused(SOLVE, decision, settings).startswith("context: decision programs (program_drafts > 0 with an")
    decision.program_drafts = 0
    SOLVE.check(decision, settings)  # the same data without programs is within the context's own limit


# ----------------------------------------------------------------------------------------------- the Scheduler


def program_drafts(settings: SchedulerSettings, request: pb.SolveRequest, num_drafts: int) -> int:
    return first_round_programs(request, num_drafts, settings)


def test_the_request_s_count_else_the_setting_at_most_n_and_none_for_a_structured_answer():
    assert program_drafts(SchedulerSettings(), pb.SolveRequest(prompt="q"), 5) == 2  # the default mix: 3 + 2
    assert program_drafts(SchedulerSettings(), pb.SolveRequest(prompt="q"), 1) == 0  # a single pass stays prose
    two = SchedulerSettings(program_drafts=2)
    assert program_drafts(two, pb.SolveRequest(prompt="q"), 5) == 2
    assert program_drafts(two, pb.SolveRequest(prompt="q", program_drafts=0), 5) == 0  # set to 0: prose only
    assert program_drafts(two, pb.SolveRequest(prompt="q", program_drafts=4), 3) == 3
    assert program_drafts(SchedulerSettings(program_drafts=8), pb.SolveRequest(prompt="q"), 3) == 2  # one prose
    decision = pb.SolveRequest(prompt="q", output_schema='{"type": "object"}')
    assert program_drafts(SchedulerSettings(), decision, 5) == 1  # --decision-program-drafts, chosen on tuning
    assert program_drafts(SchedulerSettings(decision_program_drafts=4), decision, 3) == 2  # one draft stays prose
    assert program_drafts(SchedulerSettings(decision_program_drafts=0), decision, 5) == 0


def test_a_replacement_of_a_program_is_a_program_and_of_prose_prose():
    request = drafter_service_pb2.GenerateDraftsRequest(prompt="q", num_drafts=3, program_drafts=1)
    solve = SimpleNamespace(deadline=SimpleNamespace(left=lambda: 100.0), early_stop=pb.EarlyStop())
    stubs = SimpleNamespace(drafter_replicas=DrafterReplicas("d:1"))  # one Drafter: no replicas to spread over
    one_drafter = SimpleNamespace(stubs=stubs)
    stages = SimpleNamespace(verify_timeout_s=1.0)
    round_ = StreamedRound(one_drafter, stages, solve, Stopping(streaming=True, quorum=2, replace=True), request)
    started: list[drafter_service_pb2.GenerateDraftsRequest] = []

    def start_drafter(replacement, replica=None):
        started.append(replacement)
        round_.calls.streams.append(object())

    round_.start_drafter = start_drafter
    round_.calls.streams.append(object())  # the round's own call
    assert [round_.calls.kind_of(i) for i in range(3)] == ["prose", "prose", "program"]
    round_.replace(SimpleNamespace(draft=common_pb2.Draft(index=2)), "program failed")
    round_.replace(SimpleNamespace(draft=common_pb2.Draft(index=0)), "arithmetic failed")
    assert [(r.first_index, r.num_drafts, r.program_drafts) for r in started] == [(3, 1, 1), (4, 1, 0)]
    assert round_.calls.kind_of(3) == "program" and round_.calls.kind_of(4) == "prose"


def test_the_decision_prompt_teaches_every_rule_the_exact_engine_takes():
    """A rule the sandbox's best_rows accepts but the prompt never names is one no program states (issue 55)."""
    from deliberate.drafter.decision import BEST_ROWS_HELP
    from deliberate.verifier.decision_program import SIGNATURE

    assert not [name for name in SIGNATURE if f"{name}=" not in BEST_ROWS_HELP]
