"""The program check through a real Verifier over gRPC: every hostile program is refused with its message, an
ordinary program's printed answer becomes the draft's answer, and grpc.health.v1 answers within 1 s while
hostile programs run."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.request

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from deliberate.cli.stack import Ports, Stack
from deliberate.verifier.hostile_programs import (
    DECISION_DATA,
    DECISION_GREEDY,
    DECISION_HOSTILE_PROGRAMS,
    HOSTILE_PROGRAMS,
    as_decision_draft,
    as_draft,
    refused_as_expected,
)
from deliberate.verifier.program import LIMITS
from deliberate_api.common.v1 import common_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

CONSTRAINTS = [common_pb2.Constraint(rule_pack="arithmetic"), common_pb2.Constraint(rule_pack="program")]
ORDINARY = "Janet keeps 3 eggs and bakes with 4.\n```python\neggs = 16 - 3 - 4\nprint(eggs * 2)\n```"
PROSE = "16 - 3 - 4 = 9\n9 * 2 = 18\nFinal answer: 18"


@pytest.fixture
def verifier(tmp_path):
    stack = Stack(ports=Ports.free(), log_dir=tmp_path)
    process = stack.start("verifier")
    try:
        stack.wait_healthy(90, services=["verifier"])
        yield stack
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0


def request(texts: dict[str, str]) -> verifier_service_pb2.VerifyDraftsRequest:
    drafts = [common_pb2.Draft(id=name, index=i, text=text) for i, (name, text) in enumerate(texts.items())]
    return verifier_service_pb2.VerifyDraftsRequest(
        prompt="How much does Janet make?", drafts=drafts, constraints=CONSTRAINTS
    )


def program_message(verdict) -> str:
    return next(r.message for r in verdict.rule_results if r.rule_id == "program")


def test_hostile_programs_are_refused_and_ordinary_ones_answer(verifier):
    names = sorted(HOSTILE_PROGRAMS)
    with verifier.channel("verifier") as channel:
        stub = verifier_service_pb2_grpc.VerifierServiceStub(channel)
        verdicts = {}
        for chunk in (names[:9], names[9:]):
            texts = {name: as_draft(HOSTILE_PROGRAMS[name][0]) for name in chunk} | {"ordinary": ORDINARY}
            started = time.perf_counter()
            reply = stub.VerifyDrafts(request(texts), timeout=30)
            assert time.perf_counter() - started < 5.0  # the slowest is the time limit
            verdicts.update({v.draft_id: v for v in reply.verdicts})
        for name in names:
            verdict = verdicts[name]
            message = program_message(verdict)
            assert not verdict.valid and message.startswith("program failed: "), (name, message)
            assert refused_as_expected(name, message), (name, message)
        ordinary = verdicts["ordinary"]
        assert ordinary.valid and ordinary.extracted_answer == "18" and list(ordinary.evidence) == ["program"]
        assert program_message(ordinary) == "program passed: printed 18"
        prose = stub.VerifyDrafts(request({"prose": PROSE}), timeout=30).verdicts[0]
        assert program_message(prose) == "program abstained: no python block"
        assert prose.valid and prose.extracted_answer == "18" and list(prose.evidence) == ["arithmetic"]
        rules = stub.CheckConstraints(verifier_service_pb2.CheckConstraintsRequest(constraints=CONSTRAINTS), timeout=5)
        assert list(rules.rule_ids)[:3] == ["complete", "program", "final_answer"]
    url = f"http://{verifier.host}:{verifier.ports.verifier_http}/health"
    with urllib.request.urlopen(url, timeout=5) as reply:
        assert "program" in json.loads(reply.read())["rule_packs"]


def test_health_answers_within_a_second_while_hostile_programs_run(verifier):
    loops = {f"loop{i}": as_draft(HOSTILE_PROGRAMS["infinite_loop"][0]) for i in range(12)}
    bombs = {f"bomb{i}": as_draft(HOSTILE_PROGRAMS["ten_mb_output"][0]) for i in range(4)}
    with verifier.channel("verifier") as channel:
        stub = verifier_service_pb2_grpc.VerifierServiceStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        # Six calls of 16 programs, each running to its limit, keep the sandbox's workers busy for about a second.
        calls = [stub.VerifyDrafts.future(request(loops | bombs), timeout=30) for _ in range(6)]
        waits = []
        while not all(call.done() for call in calls):
            started = time.perf_counter()
            reply = health.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
            waits.append(time.perf_counter() - started)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            time.sleep(0.05)
        assert len(waits) >= 5 and max(waits) < 1.0, waits
        for call in calls:
            verdicts = call.result().verdicts
            assert [program_message(v) for v in verdicts[:12]] == [f"program failed: exceeded {LIMITS.time_s:g} s"] * 12
            assert all(program_message(v) == "program failed: printed more than 64 KiB" for v in verdicts[12:])
        # Still serving, and an ordinary program still runs (every worker that ran a hostile one was replaced or reset).
        results = []
        threads = [
            threading.Thread(target=lambda: results.append(stub.VerifyDrafts(request({"o": ORDINARY}), timeout=10)))
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [r.verdicts[0].extracted_answer for r in results] == ["18"] * 4


def test_hostile_decision_programs_are_refused_and_the_pack_offers_its_optimum(verifier):
    """Decision programs (a structured request's, `ctx` bound to its data) through a real Verifier: the hostile ones
    refused with their messages, an ordinary one's printed plan checked and scored against the optimum, which
    CheckConstraints offers as the reference plan."""
    schema = json.dumps({"type": "object", "properties": {"selected_ids": {"type": "array"}}})
    constraints = [common_pb2.Constraint(rule_pack="ad_selection", params=struct({"budget": 3600, "picks": 3}))]
    context = struct(DECISION_DATA)
    greedy = DECISION_GREEDY
    programs = {name: code for name, (code, _) in DECISION_HOSTILE_PROGRAMS.items()} | {"greedy": greedy}
    drafts = [
        common_pb2.Draft(id=name, index=i, kind="program", text=as_decision_draft(code))
        for i, (name, code) in enumerate(programs.items())
    ]
    with verifier.channel("verifier") as channel:
        stub = verifier_service_pb2_grpc.VerifierServiceStub(channel)
        reply = stub.VerifyDrafts(
            verifier_service_pb2.VerifyDraftsRequest(
                prompt="Pick 3 ads.", drafts=drafts, output_schema=schema, constraints=constraints, context=context
            ),
            timeout=30,
        )
        checked = stub.CheckConstraints(
            verifier_service_pb2.CheckConstraintsRequest(
                output_schema=schema, constraints=constraints, context=context
            ),
            timeout=10,
        )
    verdicts = {v.draft_id: v for v in reply.verdicts}
    for name, (_, expected) in DECISION_HOSTILE_PROGRAMS.items():
        messages = "; ".join(r.message for r in verdicts[name].rule_results)
        assert not verdicts[name].valid and expected in messages, (name, messages)
    ordinary = verdicts["greedy"]
    assert ordinary.valid, [r.message for r in ordinary.rule_results]
    assert ordinary.quality.rule_pack == "ad_selection" and 0 < ordinary.quality.ratio <= 1
    assert ordinary.quality.bound == checked.reference_plan.quality.objective
    assert (
        checked.reference_plan.quality.ratio == 1.0
        and len(json.loads(checked.reference_plan.answer)["selected_ids"]) == 3
    )


def struct(value: dict):
    from google.protobuf import struct_pb2

    message = struct_pb2.Struct()
    message.update(value)
    return message
