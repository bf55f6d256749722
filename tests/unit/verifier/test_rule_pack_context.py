"""Rule packs get a context, not named services: a pack declares the Verifier's services it requires or uses, the
Verifier resolves them into its `PackContext`, and a request for a pack whose required service it lacks is refused
naming both."""

from __future__ import annotations

import json

import pytest
from google.protobuf import struct_pb2
from pydantic import BaseModel

from deliberate.core.requests import InvalidArgument
from deliberate.decisions.packs import PackContext, RulePack
from deliberate.risk.model import score
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.pack_rules import resolve_services
from deliberate.verifier.rules import verify
from deliberate.verifier.server import VerifierServicer
from deliberate.verifier.settings import VerifierSettings
from deliberate_api.common.v1 import common_pb2
from deliberate_client.examples import credit

CREDIT = ConstraintSpec(0, "rule_pack", "credit")
OFFERS = {
    "offers": [{"amount": 10000, "annual_rate": 0.099, "term_months": 36}],
    "disclosure": credit.DISCLOSURE,
}


class ScoresInProcess:
    """A risk client that scores with the model itself, no service."""

    def score_all(self, applicant, offers):
        return [score(applicant, offer) for offer in offers]


class NoParams(BaseModel):
    pass


class NeedsMail(RulePack):
    name = "needs_mail"
    params_model = NoParams
    requires = ("mail",)
    uses = ("reference",)


def test_a_pack_that_requires_a_service_the_verifier_lacks_is_refused_naming_both():
    with pytest.raises(InvalidArgument) as refused:
        compile_rules("", [CREDIT], credit.context(), {"reference": object()})
    assert str(refused.value) == (
        "constraints[0].rule_pack: rule pack 'credit' requires the service 'risk', which this Verifier does not have "
        "(it has: 'reference')"
    )
    with pytest.raises(InvalidArgument, match=r"requires the service 'risk'.*\(it has: none\)"):
        compile_rules("", [CREDIT], credit.context())


def test_the_verifier_edge_refuses_it_before_any_draft_is_verified():
    constraint = common_pb2.Constraint(rule_pack="credit")
    servicer = VerifierServicer(VerifierSettings())  # no services
    with pytest.raises(InvalidArgument, match="rule pack 'credit' requires the service 'risk'"):
        servicer.compile("", [constraint], struct_pb2.Struct())


def test_the_pack_checks_with_the_service_it_was_handed():
    rules = compile_rules("", [CREDIT], credit.context(), {"risk": ScoresInProcess()}).rules
    verdict = verify(json.dumps(OFFERS), rules)
    messages = {o.rule_id: o.message for o in verdict.outcomes}
    assert messages["risk_check"].startswith("risk_check passed: all 1 offers within limits")
    assert verdict.valid


def test_a_pack_gets_the_services_it_declared_and_no_other():
    spec = ConstraintSpec(0, "rule_pack", "needs_mail")
    mail, store, risk = object(), object(), object()
    context = resolve_services(spec, NeedsMail, {"mail": mail, "reference": store, "risk": risk})
    assert context == PackContext({"mail": mail, "reference": store})
    with pytest.raises(KeyError, match="'risk' is not declared"):
        context["risk"]
    assert resolve_services(spec, NeedsMail, {"mail": mail})["reference"] is None, "a used service may be absent"


def test_a_pack_that_requires_a_service_cannot_be_made_without_a_context():
    with pytest.raises(ValueError, match="the needs_mail pack requires mail: give it a PackContext"):
        NeedsMail(NoParams())


def test_a_pack_made_without_a_context_sees_each_used_service_as_none():
    class UsesReference(NeedsMail):
        requires = ()

    assert UsesReference(NoParams()).context["reference"] is None
