"""The credit pack through real processes: a Verifier calling a real risk-model service for every offer — an
accepted and a rejected draft, the disclosure rule, the risk service down or hanging (every offer fails closed
within the timeout, then the circuit breaker answers at once, then the service recovers), the calls as spans of
the draft's trace, and the CLI example through the whole stack on the small model."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import grpc
import pytest
from google.protobuf import struct_pb2

from deliberate.cli.stack import Ports, Stack, TlsFiles
from deliberate_api.common.v1 import common_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc
from deliberate_client.examples import credit

from .conftest import ROOT

RISK_TIMEOUT_S = 0.25
BREAKER_FAILURES = 3
BREAKER_RESET_S = 1.0
GOOD_OFFERS = [
    {"amount": 10000, "annual_rate": 0.099, "term_months": 36},
    {"amount": 20000, "annual_rate": 0.089, "term_months": 48},
    {"amount": 8000, "annual_rate": 0.079, "term_months": 24},
]
# PD 0.1017 and LGD 0.4167 for the example's applicant (docs/business-cases.md works them out).
RISKY_OFFER = {"amount": 40000, "annual_rate": 0.14, "term_months": 60}


@pytest.fixture(scope="module")
def services(otlp_receiver, tmp_path_factory):
    """A risk-model service and a Verifier wired to it, as real processes."""
    stack = Stack(
        ports=Ports.free(),
        env={
            **otlp_receiver.exporter_env(),
            "DELIBERATE_RISK_TIMEOUT_S": str(RISK_TIMEOUT_S),
            "DELIBERATE_RISK_BREAKER_FAILURES": str(BREAKER_FAILURES),
            "DELIBERATE_RISK_BREAKER_RESET_S": str(BREAKER_RESET_S),
        },
        log_dir=tmp_path_factory.mktemp("credit-logs"),
    )
    try:
        for service in ("risk", "verifier"):
            stack.start(service)
        stack.wait_healthy(60, services=("risk", "verifier"))
        yield stack
    finally:
        stack.down()


def answer(offers: list[dict], disclosure: str = credit.DISCLOSURE) -> str:
    return json.dumps({"offers": offers, "disclosure": disclosure})


def verify(stack: Stack, text: str, request_id: str = "credit-test", kind: str = "") -> common_pb2.DraftVerdict:
    request = verifier_service_pb2.VerifyDraftsRequest(
        request_id=request_id,
        prompt=credit.prompt(),
        drafts=[common_pb2.Draft(id=f"{request_id}-d0", text=text, kind=kind)],
        output_schema=json.dumps(credit.OUTPUT_SCHEMA),
        constraints=[common_pb2.Constraint(rule_pack="credit")],
        context=struct(credit.context()),
    )
    with grpc.insecure_channel(stack.address_of("verifier")) as channel:
        return verifier_service_pb2_grpc.VerifierServiceStub(channel).VerifyDrafts(request, timeout=30).verdicts[0]


def struct(value: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def messages(verdict: common_pb2.DraftVerdict) -> dict[str, str]:
    return {r.rule_id: r.message for r in verdict.rule_results}


def test_offers_within_the_limits_pass_with_their_figures(services):
    verdict = verify(services, answer(GOOD_OFFERS))
    assert verdict.valid, messages(verdict)
    risk = messages(verdict)["risk_check"]
    assert risk.startswith("risk_check passed: all 3 offers within limits (logistic-pd-lgd-1)"), risk
    assert "offer 1 (10000 at 9.90 % for 36 months): PD=0.0326, LGD=0.2917" in risk
    assert messages(verdict)["disclosure_check"] == "disclosure_check passed: the required disclosure is present"
    assert "risk_check" in verdict.evidence


def test_an_offer_over_the_limits_fails_with_its_pd_and_lgd(services):
    verdict = verify(services, answer([*GOOD_OFFERS[:2], RISKY_OFFER]))
    assert not verdict.valid
    assert messages(verdict)["risk_check"] == (
        "risk_check failed: 1 of 3 offers rejected: offer 3 (40000 at 14.00 % for 60 months): "
        "probability of default 0.1017 is 0.0517 over the limit 0.05; loss given default 0.4167 is 0.0167 over the "
        "limit 0.4"
    )


def test_the_answer_must_carry_the_disclosure_verbatim(services):
    verdict = verify(services, answer(GOOD_OFFERS, disclosure="Terms apply."))
    assert not verdict.valid
    assert messages(verdict)["disclosure_check"].startswith(
        "disclosure_check failed: the answer's disclosure must contain, verbatim: 'Credit is subject to status"
    )


def test_risk_calls_are_spans_under_the_draft_in_the_same_trace(services, otlp_receiver):
    verify(services, answer(GOOD_OFFERS), request_id="credit-trace")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        trace_id = otlp_receiver.trace_of_request("credit-trace")
        spans = otlp_receiver.trace(trace_id) if trace_id else []
        scores = [s for s in spans if s["name"] == "/deliberate.risk.v1.RiskModelService/Score"]
        if len([s for s in scores if s["service"] == "deliberate-risk"]) == 3:
            break
        time.sleep(0.2)
    by_id = {s["span_id"]: s for s in spans}
    clients = [s for s in scores if s["service"] == "deliberate-verifier"]
    servers = [s for s in scores if s["service"] == "deliberate-risk"]
    assert len(clients) == 3 and len(servers) == 3, [(s["service"], s["name"]) for s in spans]
    for client in clients:
        assert by_id[client["parent_span_id"]]["name"] == "verifier.verify_draft"
    assert {s["parent_span_id"] for s in servers} == {s["span_id"] for s in clients}
    assert sorted(round(s["attributes"]["deliberate.risk.probability_of_default"], 4) for s in servers) == [
        0.0263,
        0.0326,
        0.0426,
    ]


def test_a_decision_program_searches_offers_with_the_real_risk_service(services, otlp_receiver):
    """The credit pack's `score_offer` in a decision program: each call is a real Score call of the risk service
    (server spans in the draft's trace), and the offers the program prints pass the risk check."""
    program = (
        "```python\nimport json\napplicant = ctx['applicant']\noffers = []\nfor term in [24, 36, 60]:\n"
        "    amount = applicant['annual_income']\n    while not score_offer(amount, 0.069, term)['approved']:\n"
        "        amount = amount - 2500\n"
        "    offers.append({'amount': amount, 'annual_rate': 0.069, 'term_months': term})\n"
        "print(json.dumps({'offers': offers, 'disclosure': ctx['disclosure']}))\n```"
    )
    verdict = verify(services, program, request_id="credit-program", kind="program")
    assert verdict.valid, messages(verdict)
    offers = json.loads(verdict.extracted_answer)["offers"]
    assert [offer["term_months"] for offer in offers] == [24, 36, 60]
    assert all(offer["amount"] < credit.APPLICANT["annual_income"] for offer in offers)  # the search stepped down
    assert messages(verdict)["risk_check"].startswith("risk_check passed: all 3 offers within limits")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        trace_id = otlp_receiver.trace_of_request("credit-program")
        spans = otlp_receiver.trace(trace_id) if trace_id else []
        served = [s for s in spans if s["service"] == "deliberate-risk"]
        if len(served) > 3 + len(offers):
            break
        time.sleep(0.2)
    assert len(served) > 3 + len(offers)  # the search's calls, then the risk check's three


def test_with_the_risk_service_down_every_offer_fails_closed_then_it_recovers(services):
    risk, address = services.processes["risk"], services.address_of("risk")
    risk.send_signal(signal.SIGSTOP)  # hangs: every call waits out its timeout
    try:
        started = time.monotonic()
        verdict = verify(services, answer(GOOD_OFFERS))
        hanging = time.monotonic() - started
        started = time.monotonic()
        refused = verify(services, answer(GOOD_OFFERS))  # 3 failures in a row opened the breaker
        refused_s = time.monotonic() - started
    finally:
        risk.send_signal(signal.SIGCONT)
    assert not verdict.valid
    message = messages(verdict)["risk_check"]
    assert message.startswith(
        "risk_check failed: none of the 3 offers scored, so none approved: "
        f"risk model at {address}: DEADLINE_EXCEEDED after the 0.25 s timeout"
    ), message
    assert hanging < RISK_TIMEOUT_S + 1.0, "the offers are scored at once, each under the timeout"
    message = messages(refused)["risk_check"]
    assert not refused.valid and "circuit breaker open after 3 failed calls in a row" in message, message
    assert refused_s < RISK_TIMEOUT_S, "an open breaker answers without waiting"

    risk.terminate()
    risk.wait(15)
    time.sleep(BREAKER_RESET_S)  # half-open: one trial call, which finds nothing listening
    verdict = verify(services, answer(GOOD_OFFERS))
    message = messages(verdict)["risk_check"]
    assert message.startswith(
        f"risk_check failed: none of the 3 offers scored, so none approved: risk model at {address}: UNAVAILABLE"
    ), message

    services.start("risk")
    services.wait_healthy(60, services=("risk",))
    time.sleep(BREAKER_RESET_S)
    verdict = verify(services, answer(GOOD_OFFERS))
    assert verdict.valid, messages(verdict)


def test_over_mtls_the_verifier_scores_with_its_client_certificate(tmp_path):
    """Both serve mTLS only (as `deliberate up --tls-dir` runs them): the Verifier's calls carry its
    --downstream-tls-* certificate, so the risk service accepts them."""
    subprocess.run([ROOT / "deploy/dev-certs.sh", tmp_path / "certs"], check=True, capture_output=True)
    stack = Stack(ports=Ports.free(), log_dir=tmp_path / "logs", tls=TlsFiles.in_dir(tmp_path / "certs"))
    try:
        for service in ("risk", "verifier"):
            stack.start(service)
        stack.wait_healthy(60, services=("risk", "verifier"))
        request = verifier_service_pb2.VerifyDraftsRequest(
            prompt=credit.prompt(),
            drafts=[common_pb2.Draft(id="d0", text=answer(GOOD_OFFERS))],
            constraints=[common_pb2.Constraint(rule_pack="credit")],
            context=struct(credit.context()),
        )
        with stack.channel("verifier") as channel:
            verdict = verifier_service_pb2_grpc.VerifierServiceStub(channel).VerifyDrafts(request, timeout=30)
    finally:
        stack.down()
    assert verdict.verdicts[0].valid, messages(verdict.verdicts[0])


@pytest.mark.model
def test_the_credit_offer_example_runs_from_the_cli_through_the_whole_stack(stack, otlp_receiver):
    """`deliberate solve --example credit-offer` on the small model: the drafts' offers are scored by the risk
    service (figures in the verdicts), and its spans are in the solve's trace under the Verifier's calls."""
    solved = subprocess.run(
        [
            sys.executable, "-m", "deliberate_client.cli", "solve", "--example", "credit-offer",
            # 3 drafts, 2 of them JSON: in one run of the whole suite the single JSON draft of 2 never reached
            # the risk check (the small model's draft; the cause was not recorded), leaving no offer to look at.
            "--address", stack.address, "--num-drafts", "3", "--max-new-tokens", "180",
            # A refinement cut this short is no valid answer: the best draft is answered as drafted.
            "--refine-max-new-tokens", "16", "--seed", "1", "--timeout", "600", "--json",
        ],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert solved.returncode == 0, solved.stderr
    response = json.loads(solved.stdout)
    scored = [
        result["message"]
        for report in response["drafts"]
        for result in report["verdict"]["ruleResults"]
        if result["ruleId"] == "risk_check"
    ]
    assert scored, "a schema-constrained draft reaches the credit pack's risk check"
    # scored: a passing offer's figures (PD=…) or a breach (probability of default … over the limit …)
    assert all(re.search(r"PD=|default \d", message) and "not scored" not in message for message in scored), scored
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        spans = otlp_receiver.trace(response["traceId"])
        servers = [s for s in spans if s["service"] == "deliberate-risk"]
        if len(servers) >= 3:
            break
        time.sleep(0.2)
    clients = {s["span_id"] for s in spans if s["service"] == "deliberate-verifier" and s["name"].endswith("/Score")}
    assert servers and {s["parent_span_id"] for s in servers} <= clients
