"""Fuzzing the servicers in process: each generated request goes through the handler a gRPC call reaches (the
Verifier's VerifyDrafts and CheckConstraints, the Scheduler's validation), and must end in an allowed status
(harness.py). Failing examples found so far stay as `@example`s."""

from __future__ import annotations

import json
import math

import grpc
from hypothesis import example, given

from deliberate.scheduler.server import SchedulerServicer
from deliberate.scheduler.settings import SchedulerSettings
from deliberate.scheduler.verdicts import effective_constraints
from deliberate.verifier.server import VerifierServicer
from deliberate.verifier.settings import VerifierSettings
from deliberate_api.common.v1 import common_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2

from .harness import Tally, call_in_process, check_outcome, fuzz_settings, run
from .strategies import check_constraints_requests, solve_requests, verify_drafts_requests

VERIFIER = VerifierServicer(VerifierSettings())
SCHEDULER = SchedulerServicer(SchedulerSettings(), pipeline=None)  # validation reaches no pipeline


def with_context(request, context: dict, params: dict | None = None):
    """`request` with a context (and first constraint params) set in place, as strategies.py does."""
    request.context.update(context)
    if params is not None:
        request.constraints.add(rule_pack="arithmetic").params.update(params)
    return request


# Python's `re` backtracked exponentially on these (the Verifier hung for hours); patterns now run on a bounded engine.
AAA = "a" * 40 + "!"
NESTED_QUANTIFIER = {"type": "string", "pattern": "^(a+)+$"}
DRAFT_03 = "http://json-schema.org/draft-03/schema#"
ONLY_NESTED_QUANTIFIER_KEYS = {"patternProperties": {"^(a+)+$": {}}, "additionalProperties": False}


# CEL's cost estimate ignored what `+` and each read of a variable copy: these held the Verifier's event loop for
# ~28 s and ~133 s per draft.
CONCATENATIONS = "size(" + " + ".join(["text"] * 290) + ") > 0"
READS_IN_LOOPS = "ctx.l.all(x, ctx.l.all(y, size(text) > 0))"
LONG_DRAFT = common_pb2.Draft(text="Final answer: 1 " + "x" * 999_000)


@fuzz_settings(ci=120, full=4000)
@given(request=verify_drafts_requests())
# Checking a draft-03 schema looked its formats up among the latest draft's (KeyError, UNKNOWN).
@example(
    request=verifier_service_pb2.VerifyDraftsRequest(
        prompt="q",
        drafts=[common_pb2.Draft(text='{"a": "' + AAA + '"}')],
        output_schema=json.dumps(
            {"$schema": "http://json-schema.org/draft-03/schema#", "properties": {"a": NESTED_QUANTIFIER}}
        ),
    )
)
# Half a surrogate pair escaped in the draft's JSON reached protobuf and CEL as a lone surrogate (UNKNOWN).
@example(
    request=verifier_service_pb2.VerifyDraftsRequest(
        prompt="q", drafts=[common_pb2.Draft(text='{"a": "\\ud83d"}')], output_schema='{"type": "object"}'
    )
)
@example(
    request=verifier_service_pb2.VerifyDraftsRequest(
        prompt="q",
        drafts=[common_pb2.Draft(text='{"ids": "\\udfff"}')],
        constraints=[common_pb2.Constraint(cel_expression="answer.ids == 1")],
    )
)
@example(
    request=verifier_service_pb2.VerifyDraftsRequest(
        prompt="q", drafts=[LONG_DRAFT], constraints=[common_pb2.Constraint(cel_expression=CONCATENATIONS)]
    )
)
@example(
    request=with_context(
        verifier_service_pb2.VerifyDraftsRequest(
            prompt="q", drafts=[LONG_DRAFT], constraints=[common_pb2.Constraint(cel_expression=READS_IN_LOOPS)]
        ),
        {"l": list(range(900))},
    )
)
@example(
    request=verifier_service_pb2.VerifyDraftsRequest(
        prompt="q", drafts=[common_pb2.Draft(text=json.dumps(AAA))], output_schema=json.dumps(NESTED_QUANTIFIER)
    )
)
@example(
    request=verifier_service_pb2.VerifyDraftsRequest(
        prompt="q",
        drafts=[common_pb2.Draft(text=json.dumps({AAA: 1}))],
        constraints=[common_pb2.Constraint(json_schema=json.dumps(ONLY_NESTED_QUANTIFIER_KEYS))],
    )
)
def test_verify_drafts(request):
    outcome = run(call_in_process(VERIFIER.VerifyDrafts, request))
    check_outcome(outcome, request)
    Tally.add("Verifier.VerifyDrafts (in process)", outcome)


@fuzz_settings(ci=80, full=3000)
@given(request=check_constraints_requests())
# Struct numbers that JSON cannot hold escaped struct_to_dict as ValueError (UNKNOWN); now refused at the edge.
@example(request=with_context(verifier_service_pb2.CheckConstraintsRequest(), {"budget": math.nan}))
# An output schema nested past the JSON decoder's recursion limit escaped json.loads as RecursionError (UNKNOWN).
@example(request=verifier_service_pb2.CheckConstraintsRequest(output_schema="[" * 10_000))
@example(request=with_context(verifier_service_pb2.CheckConstraintsRequest(), {}, {"x": [{"y": -math.inf}]}))
def test_check_constraints(request):
    outcome = run(call_in_process(VERIFIER.CheckConstraints, request))
    check_outcome(outcome, request)
    Tally.add("Verifier.CheckConstraints (in process)", outcome)


@fuzz_settings(ci=80, full=3000)
@given(request=solve_requests())
def test_solve_validation(request):
    """The Scheduler's edge (`check`: the field limits and the output schema), then, for a request it lets
    through with constraints, the first thing its pipeline does: the Verifier's CheckConstraints."""
    outcome = run(call_in_process(SCHEDULER.check, request))
    if outcome.code == grpc.StatusCode.OK and (request.constraints or request.output_schema):
        checks = verifier_service_pb2.CheckConstraintsRequest(
            output_schema=request.output_schema, constraints=effective_constraints(request), context=request.context
        )
        outcome = run(call_in_process(VERIFIER.CheckConstraints, checks))
    check_outcome(outcome, request)
    Tally.add("Scheduler validation + CheckConstraints (in process)", outcome)
