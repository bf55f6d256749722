"""Promotion plans through the real services: the Verifier process rejects and accepts plans with the figures
named, and `deliberate solve --example promotion --notify URL` runs the whole stack and delivers the final plan
to a real local receiver, or says on stderr and by its exit status that it could not."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from deliberate.cli.local_redis import free_port
from deliberate_api.common.v1 import common_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc
from deliberate_client.cli import EXIT_NOT_NOTIFIED
from deliberate_client.examples import promotion
from tests.webhook_receiver import receiving

pytestmark = pytest.mark.model

RULE_ORDER = [
    "complete", "json_parse", "json_schema", "promotion", "sku_check", "stock_check", "discount_cap_check",
    "margin_check", "plan_margin_check", "claims_check", "advertised_discount_check", "plan_total",
]  # fmt: skip
ACCEPTED = {
    "items": [
        {"sku": "TEA-100", "discount_percent": 25, "quantity": 100},
        {"sku": "PRS-08", "discount_percent": 40, "quantity": 30},
        {"sku": "GRD-01", "discount_percent": 15, "quantity": 10},
    ],
    "message": "This week: up to 40% off French presses, plus deals on green tea and our burr grinder.",
}


def with_item(which: str, **changed) -> dict:
    """The accepted plan with the fields of item `which` (its sku) changed."""
    return {**ACCEPTED, "items": [{**i, **changed} if i["sku"] == which else i for i in ACCEPTED["items"]]}


def example_context() -> struct_pb2.Struct:
    context = struct_pb2.Struct()
    context.update(promotion.context())
    return context


def verify(stack, plans: list[dict | str]):
    request = verifier_service_pb2.VerifyDraftsRequest(
        prompt=promotion.prompt(),
        drafts=[
            common_pb2.Draft(id=f"d{i}", index=i, text=p if isinstance(p, str) else json.dumps(p))
            for i, p in enumerate(plans)
        ],
        output_schema=json.dumps(promotion.output_schema()),
        constraints=[json_format.ParseDict(c, common_pb2.Constraint()) for c in promotion.constraints()],
        context=example_context(),
    )
    with grpc.insecure_channel(stack.address_of("verifier")) as channel:
        return verifier_service_pb2_grpc.VerifierServiceStub(channel).VerifyDrafts(request, timeout=30).verdicts


def results(verdict) -> dict[str, str]:
    return {r.rule_id: r.message for r in verdict.rule_results}


def test_the_real_verifier_rejects_and_accepts_plans_naming_sku_and_figures(stack):
    accepted, over_stock, thin_margin, forbidden = verify(
        stack,
        [
            f"Here is the plan:\n```json\n{json.dumps(ACCEPTED)}\n```",
            with_item("GRD-01", quantity=20),
            with_item("TEA-100", sku="COF-1KG", discount_percent=25, quantity=20),
            {**ACCEPTED, "message": "Lowest price EVER on French presses: 40% off!"},
        ],
    )
    assert accepted.valid, results(accepted)
    assert [r.rule_id for r in accepted.rule_results] == RULE_ORDER
    assert set(accepted.evidence) >= {"stock_check", "margin_check", "plan_margin_check", "claims_check"}
    assert results(accepted)["plan_total"] == (
        "plan_total passed: 3 products, 140 units, revenue 1266.00, gross profit 424.00 (33.5%)"
    )
    assert not over_stock.valid
    assert results(over_stock)["stock_check"].startswith(
        "stock_check failed: GRD-01: quantity 20 is 8 over the stock 12, so use {"
    )
    assert not thin_margin.valid
    assert results(thin_margin)["margin_check"] == (
        "margin_check failed: COF-1KG: margin 18.3% is 1.7 points under the floor 20% (price 16.00 −25% = 12.00, "
        'unit cost 9.80), so use {"sku": "COF-1KG", "discount_percent": 23.43, "quantity": 20}'
    )
    assert not forbidden.valid
    assert results(forbidden)["claims_check"] == (
        "claims_check failed: the message makes forbidden claims: 'lowest price ever'"
    )


def test_the_verifier_lists_the_promotion_pack_and_its_rule_order(stack):
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports.verifier_http}/health", timeout=5) as reply:
        assert "promotion" in json.loads(reply.read())["rule_packs"]
    request = verifier_service_pb2.CheckConstraintsRequest(
        output_schema=json.dumps(promotion.output_schema()),
        constraints=[json_format.ParseDict(c, common_pb2.Constraint()) for c in promotion.constraints()],
        context=example_context(),
    )
    with grpc.insecure_channel(stack.address_of("verifier")) as channel:
        reply = verifier_service_pb2_grpc.VerifierServiceStub(channel).CheckConstraints(request, timeout=10)
    assert list(reply.rule_ids) == RULE_ORDER


def solve(stack, *args: str) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "deliberate_client.cli", "solve", "--address", stack.address, "--json",
        "--timeout", "480", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=540)


def test_solve_the_promotion_example_and_deliver_the_final_plan_to_a_webhook(stack):
    """The example through CLI, Scheduler, Drafter, Verifier and Refiner to the receiver. Short budgets keep it
    cheap (the small model's plans are then cut short and fail `json_parse`; the verdicts on whole plans are the
    test above's), so the delivered status is whatever the run reached: --notify-status lets every one through."""
    with receiving() as receiver:
        done = solve(
            stack, "--example", "promotion", "--num-drafts", "2", "--max-new-tokens", "32",
            "--refine-max-new-tokens", "32", "--seed", "5", "--request-id", "promo-cli-1",
            "--notify", receiver.url, "--notify-status", "verified,unchecked,unverified",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    final = json.loads(done.stdout)
    for report in final["drafts"]:
        ran = [r["ruleId"] for r in report["verdict"]["ruleResults"]]
        order = RULE_ORDER if report["draft"].get("kind") != "program" else [RULE_ORDER[0], "program", *RULE_ORDER[1:]]
        assert ran == order[: len(ran)], "the promotion pack's rules, cheapest first"
    [delivered] = receiver.requests
    assert delivered.headers["Idempotency-Key"] == "promo-cli-1"
    body = delivered.json
    assert body["request_id"] == final["requestId"] == "promo-cli-1"
    assert body["status"] == final["status"].removeprefix("SOLVE_STATUS_")
    assert body["verified_by"] == final.get("verifiedBy", [])
    assert body["answer"] in final["answer"]
    assert f"notify: delivered to {receiver.url} (HTTP 200, attempt 1)" in done.stderr


def test_a_webhook_that_is_down_is_an_error_but_the_answer_is_still_printed(stack):
    url = f"http://127.0.0.1:{free_port()}/hook"
    done = solve(
        stack, "Tom has 3 boxes of 12 eggs. He uses 5. How many are left?", "--num-drafts", "2",
        "--max-new-tokens", "24", "--refine-max-new-tokens", "16", "--seed", "7",
        "--notify", url, "--notify-status", "verified,unchecked,unverified", "--notify-attempts", "2",
    )  # fmt: skip
    assert done.returncode == EXIT_NOT_NOTIFIED, done.stderr
    assert json.loads(done.stdout)["answer"].strip(), "the answer is not lost"
    assert f"error: notify {url}: not delivered after 2 attempts; last: cannot connect: " in done.stderr
