"""Declared constraints through the real services: the ad-selection example, auditable rule results,
and INVALID_ARGUMENT for constraints that do not compile — before any token is generated."""

from __future__ import annotations

import json
import time
import urllib.request

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc
from deliberate_client.client import DeliberateClient, build_request
from deliberate_client.examples import ads

pytestmark = pytest.mark.model

# What the ad-selection example compiles to, cheapest first.
RULE_ORDER = [
    "complete",
    "json_parse",
    "json_schema",
    "size_check",
    "pool_check",
    "ad_selection",
    "catalog_check",
    "picks_check",
    "budget_check",
    "category_check",
    "ctr_total",
]

FIVE_ADS = [
    {"id": 1, "cost": 1000, "ctr": 0.02, "category": "travel"},
    {"id": 2, "cost": 1000, "ctr": 0.03, "category": "finance"},
    {"id": 3, "cost": 1000, "ctr": 0.01, "category": "retail"},
    {"id": 4, "cost": 1000, "ctr": 0.02, "category": "auto"},
    {"id": 5, "cost": 1023, "ctr": 0.04, "category": "food"},
    {"id": 6, "cost": 500, "ctr": 0.05, "category": "travel"},
    {"id": 7, "cost": 900, "ctr": 0.01, "category": "tech"},
]


def verify(stack, texts: list[str], catalog=FIVE_ADS, pool=None):
    context = struct_pb2.Struct()
    context.update({"pool": pool or [a["id"] for a in catalog]})
    constraints = [json_format.ParseDict(c, common_pb2.Constraint()) for c in ads.CONSTRAINTS]
    constraints[-1].params.update({"catalog": catalog})
    request = verifier_service_pb2.VerifyDraftsRequest(
        prompt="Select 5 ads.",
        drafts=[common_pb2.Draft(id=f"d{i}", index=i, text=t) for i, t in enumerate(texts)],
        output_schema=json.dumps(ads.OUTPUT_SCHEMA),
        constraints=constraints,
        context=context,
    )
    with grpc.insecure_channel(stack.address_of("verifier")) as channel:
        return verifier_service_pb2_grpc.VerifierServiceStub(channel).VerifyDrafts(request, timeout=30).verdicts


def results(verdict) -> dict[str, str]:
    return {r.rule_id: r.message for r in verdict.rule_results}


def test_ad_plans_get_auditable_verdicts_from_the_real_verifier(stack):
    over_budget, conflict, feasible = verify(
        stack,
        [
            'My plan: {"selected_ids": [1, 2, 3, 4, 5]} (total 4999)',  # the written total is ignored
            "```json\n{\u201cselected_ids\u201d: [1, 2, 3, 6, 7]}\n```",  # curly quotes, repaired
            '{"selected_ids": [2, 3, 4, 6, 7],}',  # trailing comma, repaired
        ],
    )
    assert not over_budget.valid
    assert results(over_budget)["budget_check"] == "budget_check failed: total cost 5,023 is 23 over the budget 5,000"
    assert not conflict.valid
    assert results(conflict)["json_parse"] == "json_parse passed after repair: curly quotes"
    assert results(conflict)["category_check"] == "category_check failed: ads 1 and 6 are both in category 'travel'"
    assert feasible.valid, results(feasible)
    assert feasible.score == 1.0
    assert results(feasible)["ctr_total"] == "ctr_total passed: total ctr=0.1200"
    for verdict in (over_budget, conflict, feasible):
        for rule in verdict.rule_results:
            assert rule.message.startswith(f"{rule.rule_id} passed") or rule.message.startswith(
                f"{rule.rule_id} failed"
            )


def test_hostile_drafts_are_verdicts_not_crashes(stack):
    hostile = ["[" * 200_000, "9" * 100_000 + " = 1", '{"selected_ids": [' + "1," * 100_000 + "1]}", "\u202e" * 50_000]
    verdicts = verify(stack, hostile)
    assert len(verdicts) == len(hostile)
    assert not any(v.valid for v in verdicts)
    assert stack.is_serving("verifier")


def test_solve_on_the_ad_selection_example_returns_per_draft_rule_results(stack):
    subset = ads.load_catalog()[:12]
    request = build_request(
        ads.prompt(subset),
        num_drafts=2,
        max_new_tokens=40,
        refine_max_new_tokens=8,
        seed=3,
        output_schema=json.dumps(ads.OUTPUT_SCHEMA),
        constraints=ads.CONSTRAINTS,
        context=ads.context(subset),
    )
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=240)
    assert 1 <= response.rounds <= 3, "re-drafts at most twice (the default K)"
    assert len(response.drafts) == 2 * response.rounds
    if response.rounds > 1:
        assert not any(r.verdict.valid for r in response.drafts if r.round < response.rounds - 1)
    for report in response.drafts:
        ran = [r.rule_id for r in report.verdict.rule_results]
        order = rule_order(report.draft.kind)
        assert ran == order[: len(ran)], "rules run in cost order and stop at the first hard failure"
        failed_hard = [r for r in report.verdict.rule_results if r.hard and not r.passed]
        assert report.verdict.valid == (not failed_hard)
        if failed_hard:
            assert ran[-1] == failed_hard[0].rule_id
    assert response.status in (pb.SOLVE_STATUS_VERIFIED, pb.SOLVE_STATUS_UNVERIFIED)


@pytest.mark.parametrize(
    ("constraints", "field", "detail"),
    [
        ([{"celExpression": "size(plan.selected_ids) =="}], "constraints[0].cel_expression", "Syntax error"),
        ([{"celExpression": "true"}, {"rulePack": "no_such_pack"}], "constraints[1].rule_pack", "unknown rule pack"),
        ([{"jsonSchema": '{"type": "nope"}'}], "constraints[0].json_schema", "is invalid at"),
        ([{"rulePack": "ad_selection", "params": {"budget": "lots"}}], "constraints[0].params", "budget"),
        ([{}], "constraints[0]", "set one of"),
        ([{"celExpression": "true"}] * 33, "constraints", "the limit is 32"),
    ],
)
def test_constraints_that_do_not_compile_are_refused_before_drafting(stack, constraints, field, detail):
    request = build_request("Pick ads.", num_drafts=2, max_new_tokens=64, constraints=constraints)
    started = time.monotonic()
    with DeliberateClient(stack.address) as client, pytest.raises(grpc.RpcError) as raised:
        client.solve(request, timeout=60)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith(f"{field}: ")
    assert detail in raised.value.details()
    assert time.monotonic() - started < 5, "refused without generating"


def rule_order(kind: str) -> list[str]:
    """A decision program's rules: its program runs before the JSON it printed is parsed."""
    return RULE_ORDER if kind != "program" else [RULE_ORDER[0], "program", *RULE_ORDER[1:]]


def test_check_constraints_lists_the_rule_order(stack):
    request = verifier_service_pb2.CheckConstraintsRequest(
        output_schema=json.dumps(ads.OUTPUT_SCHEMA),
        constraints=[json_format.ParseDict(c, common_pb2.Constraint()) for c in ads.CONSTRAINTS],
    )
    with grpc.insecure_channel(stack.address_of("verifier")) as channel:
        reply = verifier_service_pb2_grpc.VerifierServiceStub(channel).CheckConstraints(request, timeout=10)
    assert list(reply.rule_ids) == RULE_ORDER


def test_verifier_health_lists_the_loaded_rule_packs(stack):
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports.verifier_http}/health", timeout=5) as reply:
        body = json.loads(reply.read())
    assert body["serving"] is True
    assert {"ad_selection", "arithmetic"} <= set(body["rule_packs"])
