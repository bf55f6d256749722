"""Fuzzing through real gRPC: the generated requests go to a real Verifier process (which needs no model) and, in
the full profile (`make fuzz`), to a real stack's Scheduler on the small model with `max_new_tokens` 1, so the
fuzz tests the edges rather than the model. Every call must end in an allowed status (harness.py) and the
processes must still be serving afterwards."""

from __future__ import annotations

from datetime import timedelta

import grpc
import pytest
from hypothesis import given

from deliberate.cli.stack import Ports, Stack
from deliberate.scheduler.server import validate
from deliberate.scheduler.settings import SchedulerSettings
from deliberate_api.scheduler.v1 import scheduler_service_pb2_grpc
from deliberate_api.verifier.v1 import verifier_service_pb2_grpc

from .harness import CASE_LIMIT_S, PROFILE, Outcome, Tally, check_outcome, fuzz_settings
from .strategies import check_constraints_requests, solve_requests, verify_drafts_requests

# A solve drafts, verifies, maybe re-drafts and refines: a few seconds with 1-token drafts on the small model.
SOLVE_LIMIT_S = 120.0


def call_over_grpc(method, request, timeout_s: float = CASE_LIMIT_S) -> Outcome:
    try:
        method(request, timeout=timeout_s)
    except grpc.RpcError as error:
        return Outcome(error.code(), error.details() or "")
    return Outcome(grpc.StatusCode.OK)


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    """A lone Verifier process (no model), as the Scheduler's supervisor would start it."""
    stack = Stack(ports=Ports.free(), log_dir=tmp_path_factory.mktemp("fuzz-verifier"), with_gateway=False)
    stack.start("verifier")
    try:
        stack.wait_healthy(60, services=("verifier",))
        with stack.channel("verifier") as channel:
            yield verifier_service_pb2_grpc.VerifierServiceStub(channel)
        assert stack.is_serving("verifier"), f"the Verifier stopped serving; see {stack.log_dir}"
    finally:
        stack.down()


@fuzz_settings(ci=30, full=450)
@given(request=verify_drafts_requests())
def test_verify_drafts(verifier, request):
    outcome = call_over_grpc(verifier.VerifyDrafts, request)
    check_outcome(outcome, request)
    Tally.add("Verifier.VerifyDrafts (gRPC)", outcome)


@fuzz_settings(ci=20, full=150)
@given(request=check_constraints_requests())
def test_check_constraints(verifier, request):
    outcome = call_over_grpc(verifier.CheckConstraints, request)
    check_outcome(outcome, request)
    Tally.add("Verifier.CheckConstraints (gRPC)", outcome)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    if PROFILE != "full":
        pytest.skip("a real stack with the model: the full profile only (make fuzz)")
    state = tmp_path_factory.mktemp("fuzz-stack")
    with Stack(ports=Ports.free(), log_dir=state / "logs", state_dir=state, with_gateway=False) as stack:
        with stack.channel("scheduler") as channel:
            yield scheduler_service_pb2_grpc.SchedulerServiceStub(channel)
        for service, process in stack.processes.items():
            assert process.poll() is None, f"{service} died during the fuzz; see {stack.log_dir}"


@pytest.mark.model
@fuzz_settings(ci=1, full=120, deadline=timedelta(seconds=SOLVE_LIMIT_S))
@given(request=solve_requests())
def test_solve(scheduler, request):
    """A request the Scheduler will run gets 1-token drafts and refinement: the fuzz is of the edges."""
    try:
        validate(request, SchedulerSettings())
    except ValueError:
        pass
    else:
        request.sampling.max_new_tokens = 1
        request.refine_sampling.max_new_tokens = 1
    outcome = call_over_grpc(scheduler.Solve, request, SOLVE_LIMIT_S)
    check_outcome(outcome, request)
    Tally.add("Scheduler.Solve (gRPC, small model)", outcome)
