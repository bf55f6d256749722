"""Field limits declared once (core/limits.py, each service's limits.py): the generic validator on real request
messages, and the protos' comments and docs/limits.md's table written from the same declarations."""

from __future__ import annotations

import pytest

from deliberate import limits_table
from deliberate.core.limits import SAMPLING, Count, MessageLimits, Range, Setting, Text, nested
from deliberate.core.requests import InvalidArgument
from deliberate.drafter.limits import GENERATE_DRAFTS
from deliberate.drafter.settings import DrafterSettings
from deliberate.refiner.limits import REFINE
from deliberate.refiner.settings import RefinerSettings
from deliberate.scheduler.limits import SOLVE
from deliberate.scheduler.settings import SchedulerSettings
from deliberate.verifier.limits import CHECK_CONSTRAINTS, VERIFY_DRAFTS
from deliberate.verifier.settings import VerifierSettings
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_api.refiner.v1 import refiner_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2


def refused(limits: MessageLimits, request, settings) -> str:
    with pytest.raises(InvalidArgument) as raised:
        limits.check(request, settings)
    return str(raised.value)


def test_a_valid_request_passes_and_unset_optional_sampling_fields_are_not_checked():
    SOLVE.check(scheduler_service_pb2.SolveRequest(prompt="What is 2 + 2?"), SchedulerSettings())
    # proto3 `optional`: an unset temperature is 0.0 on the wire, and 0.0 is no override
    request = scheduler_service_pb2.SolveRequest(prompt="q", sampling=common_pb2.SamplingParams(top_p=0.5))
    SOLVE.check(request, SchedulerSettings())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"prompt": " \n"}, "prompt: must not be empty"),
        ({"prompt": "x" * 8001}, "prompt: has 8001 characters; the limit is 8000"),
        ({"num_drafts": 9}, "num_drafts: must be in [0, 8], got 9"),
        ({"strategy_hints": ["a"] * 9}, "strategy_hints: has 9 items; the limit is 8"),
        ({"strategy_hints": ["ok", "x" * 501]}, "strategy_hints[1]: has 501 characters; the limit is 500"),
        ({"request_id": "r" * 129}, "request_id: has 129 characters; the limit is 128"),
        ({"sampling": common_pb2.SamplingParams(temperature=9.0)}, "sampling.temperature: must be in [0.0, 2.0]"),
        ({"refine_sampling": common_pb2.SamplingParams(max_new_tokens=5000)}, "refine_sampling.max_new_tokens"),
        ({"sampling": common_pb2.SamplingParams(presence_penalty=-3)}, "sampling.presence_penalty: must be in"),
    ],
)
def test_solve_request_errors_begin_with_the_concrete_field_path(change, message):
    request = scheduler_service_pb2.SolveRequest(**{"prompt": "q", **change})
    assert refused(SOLVE, request, SchedulerSettings()).startswith(message)


def test_a_32_bit_float_at_a_bound_is_the_bound_the_client_sent():
    at_bounds = common_pb2.SamplingParams(top_p=0.01, temperature=2.0, presence_penalty=-2.0)
    assert at_bounds.top_p < 0.01  # 0.009999999776… once stored as a 32-bit float
    SOLVE.check(scheduler_service_pb2.SolveRequest(prompt="q", sampling=at_bounds), SchedulerSettings())
    below = scheduler_service_pb2.SolveRequest(prompt="q", sampling=common_pb2.SamplingParams(top_p=0.0099))
    assert refused(SOLVE, below, SchedulerSettings()) == "sampling.top_p: must be in [0.01, 1.0], got 0.0099"


def test_bounds_come_from_the_serving_service_s_settings():
    request = drafter_service_pb2.GenerateDraftsRequest(prompt="q", num_drafts=6)
    GENERATE_DRAFTS.check(request, DrafterSettings())
    assert refused(GENERATE_DRAFTS, request, DrafterSettings(max_drafts=4)) == "num_drafts: must be in [1, 4], got 6"
    request.sampling.max_new_tokens = 900
    message = refused(GENERATE_DRAFTS, request, DrafterSettings(max_new_tokens_limit=512))
    assert message == "sampling.max_new_tokens: must be in [1, 512], got 900"


def test_nested_repeated_paths_name_the_element():
    draft = common_pb2.Draft(text="x" * 11)
    request = refiner_service_pb2.RefineRequest(
        prompt="q", selected=[refiner_service_pb2.VerifiedDraft(), refiner_service_pb2.VerifiedDraft(draft=draft)]
    )
    message = refused(REFINE, request, RefinerSettings(max_draft_chars=10))
    assert message == "selected[1].draft.text: has 11 characters; the limit is 10"
    assert (
        refused(REFINE, refiner_service_pb2.RefineRequest(prompt="q"), RefinerSettings())
        == "selected: must not be empty"
    )


def test_verify_drafts_counts_and_sizes():
    request = verifier_service_pb2.VerifyDraftsRequest(prompt="q", drafts=[common_pb2.Draft(text="a")] * 3)
    VERIFY_DRAFTS.check(request, VerifierSettings())
    assert refused(VERIFY_DRAFTS, request, VerifierSettings(max_drafts=2)) == "drafts: has 3 items; the limit is 2"
    request.drafts[2].text = "long"
    assert refused(VERIFY_DRAFTS, request, VerifierSettings(max_draft_chars=3)).startswith("drafts[2].text: has 4")


def test_constraint_limits_hold_wherever_a_request_carries_constraints():
    many = [common_pb2.Constraint(cel_expression="true")] * 33
    for limits, message, settings in (
        (CHECK_CONSTRAINTS, verifier_service_pb2.CheckConstraintsRequest, VerifierSettings()),
        (SOLVE, scheduler_service_pb2.SolveRequest, SchedulerSettings()),
    ):
        fields = {"prompt": "q"} if message is scheduler_service_pb2.SolveRequest else {}
        assert (
            refused(limits, message(constraints=many, **fields), settings)
            == "constraints: has 33 items; the limit is 32"
        )
        long_cel = [common_pb2.Constraint(cel_expression="true"), common_pb2.Constraint(cel_expression="1" * 2049)]
        assert refused(limits, message(constraints=long_cel, **fields), settings) == (
            "constraints[1].cel_expression: has 2049 characters; the limit is 2048"
        )
        big = message(**fields)
        big.context.update({"pool": "x" * (1024 * 1024)})
        assert refused(limits, big, settings).startswith("context: has 10485")


def test_the_first_broken_field_in_declaration_order_is_reported():
    request = scheduler_service_pb2.SolveRequest(prompt="", num_drafts=99)
    assert refused(SOLVE, request, SchedulerSettings()) == "prompt: must not be empty"


@pytest.mark.parametrize("path", ["promt", "strategies.text", "sampling[].temperature", "selected.draft.text"])
def test_a_declared_path_the_message_lacks_fails_at_declaration(path):
    message = (
        refiner_service_pb2.RefineRequest if path.startswith("selected") else drafter_service_pb2.GenerateDraftsRequest
    )
    with pytest.raises(KeyError):
        MessageLimits(message, DrafterSettings, {path: Text(10)})


def test_rules_describe_themselves_with_their_setting_defaults():
    assert Text(Setting("max_prompt_chars"), required=True).describe(SchedulerSettings) == (
        "required, at most 8000 characters (--max-prompt-chars)"
    )
    assert Range(0, Setting("max_drafts")).describe(SchedulerSettings) == "in [0, 8] (--max-drafts)"
    assert Count(1, 16).describe(VerifierSettings) == "1 to 16 items"
    assert nested("sampling", SAMPLING)["sampling.top_p"].describe(SchedulerSettings) == "in [0.01, 1]"


def test_protos_and_the_limits_page_hold_what_the_declarations_write():
    assert limits_table.PAGE in limits_table.written()
    assert limits_table.PAGE == limits_table.ROOT / "docs" / "limits.md"
    stale = [
        str(path.relative_to(limits_table.ROOT))
        for path, text in limits_table.written().items()
        if path.read_text() != text
    ]
    assert not stale, f"out of date, run `make limits`: {stale}"


def test_a_changed_declaration_makes_the_limits_page_out_of_date_until_make_limits(monkeypatch):
    monkeypatch.setitem(SOLVE.fields, "request_id", Text(64))
    page = limits_table.written()[limits_table.PAGE]
    assert page != limits_table.PAGE.read_text()
    assert "| scheduler | `SolveRequest.request_id` | at most 64 characters |" in page


def test_rewriting_the_comments_is_idempotent_and_replaces_an_old_limits_line():
    proto = "message M {\n  // The question.\n  // Limits: old.\n  string prompt = 1;\n  int32 n = 2;\n}\n"
    once = limits_table.with_comments(proto, "M", {"prompt": "new."})
    assert once == "message M {\n  // The question.\n  // Limits: new.\n  string prompt = 1;\n  int32 n = 2;\n}\n"
    assert limits_table.with_comments(once, "M", {"prompt": "new."}) == once
