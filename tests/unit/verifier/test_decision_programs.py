"""Decision programs: a structured request's program reads the request's data as `ctx` in the Verifier's sandbox and
prints the JSON plan, which the request's rules check as a JSON draft's; hostile ones are refused; a draft that
declares itself a program is never judged on its text alone; the Drafter describes the data's shape, not its rows."""

from __future__ import annotations

import json

import pytest

from deliberate.drafter.decision import (
    decision_prefill,
    decision_user_message,
    list_sizes,
    skeleton,
    without_data_rows,
)
from deliberate.verifier.constraint_spec import ConstraintSpec
from deliberate.verifier.constraints import compile_rules
from deliberate.verifier.hostile_programs import (
    DECISION_DATA,
    DECISION_GREEDY,
    DECISION_HOSTILE_PROGRAMS,
    as_decision_draft,
)
from deliberate.verifier.rules import verify
from deliberate_client.examples import ads

SCHEMA = {"type": "object", "properties": {"selected_ids": {"type": "array", "items": {"type": "integer"}}}}
GREEDY = DECISION_GREEDY


def rule_set(data: dict = DECISION_DATA):
    specs = [
        ConstraintSpec(0, "cel_expression", "size(plan.selected_ids) == 3", id="size_check"),
        ConstraintSpec(1, "rule_pack", "ad_selection", params={"budget": data["budget"], "picks": 3}),
    ]
    return compile_rules(json.dumps(SCHEMA), specs, data)


def verify_program(code: str, data: dict = DECISION_DATA, kind: str = "program"):
    rules = rule_set(data)
    return verify(as_decision_draft(code), rules.rules_for(kind), "stop", rules.output_schema, data, kind)


def messages(verdict) -> str:
    return "; ".join(o.message for o in verdict.outcomes)


def test_a_decision_program_s_printed_plan_is_checked_by_every_rule_and_scored_against_the_optimum():
    verdict = verify_program(GREEDY)
    assert verdict.valid, messages(verdict)
    ids = json.loads(verdict.extracted_answer)["selected_ids"]
    assert len(ids) == 3
    ran = [o.rule_id for o in verdict.outcomes]
    assert ran[:4] == ["complete", "program", "json_parse", "json_schema"]
    assert {"size_check", "budget_check", "category_check"} <= set(ran)
    assert "program" in verdict.evidence and "budget_check" in verdict.evidence
    quality = verdict.quality
    assert quality is not None and quality.name == "total ctr" and quality.pack == "ad_selection"
    true_total = sum(ad["ctr"] for ad in DECISION_DATA["catalog"] if ad["id"] in ids)
    assert quality.objective == pytest.approx(true_total)
    assert quality.bound is not None and quality.objective <= quality.bound + 1e-9
    reference = rule_set().reference_plan()
    assert reference is not None
    best = reference[1]["selected_ids"]
    assert sum(ad["ctr"] for ad in DECISION_DATA["catalog"] if ad["id"] in best) == pytest.approx(quality.bound)


def test_a_program_that_formulates_the_question_for_best_rows_prints_the_optimum():
    """The exact engine in the sandbox: the plan the rules check is the solver's, so it scores the bound itself; a
    formulation the engine cannot read fails with a message naming the argument."""
    code = (
        'plan = best_rows(ctx["catalog"], maximize="ctr", count=3, at_most={"cost": ctx["budget"]}, one_per="category")'
        '\nprint(json.dumps({"selected_ids": [row["id"] for row in plan]}))\n'
    )
    verdict = verify_program(code)
    assert verdict.valid, messages(verdict)
    assert verdict.quality.objective == pytest.approx(verdict.quality.bound)
    assert (
        sorted(json.loads(verdict.extracted_answer)["selected_ids"]) == rule_set().reference_plan()[1]["selected_ids"]
    )
    wrong_field = verify_program(code.replace('maximize="ctr"', 'maximize="value"'))
    assert not wrong_field.valid
    assert "best_rows: maximize: rows[0] has no key 'value' (it has id, cost, ctr, category)" in messages(wrong_field)
    impossible = verify_program(code.replace('ctx["budget"]', "100"))
    assert "best_rows: no choice of rows satisfies the count and the limits" in messages(impossible)
    # A formulation that forgets a rule prints a plan the pack refuses: the engine is no check of its own.
    miscounted = verify_program(code.replace("count=3", "count=4"))
    assert not miscounted.valid and "size_check failed" in messages(miscounted)


def test_a_program_states_rules_beyond_the_example_through_the_engine_in_the_sandbox():
    """At most two ads of a category, one named ad that must be in, a category left out, the count as a range: the
    keyword-only rules reach `decisions.solver.best_rows` from the sandbox, and a misspelled one is named."""
    catalog = DECISION_DATA["catalog"]
    must, banned = catalog[0]["id"], next(ad["category"] for ad in catalog if ad["category"] != catalog[0]["category"])
    code = (
        f'plan = best_rows(ctx["catalog"], maximize="ctr", count=[1, 3], at_most={{"cost": ctx["budget"]}}, '
        f'most_per={{"category": 2}}, include={{"id": [{must}]}}, exclude={{"category": ["{banned}"]}})'
        '\nprint(json.dumps({"selected_ids": [row["id"] for row in plan]}))\n'
    )
    verdict = verify_program(code)
    chosen = [ad for ad in catalog if ad["id"] in json.loads(verdict.extracted_answer)["selected_ids"]]
    assert 1 <= len(chosen) <= 3 and must in [ad["id"] for ad in chosen]
    assert banned not in [ad["category"] for ad in chosen]
    assert sum(ad["cost"] for ad in chosen) <= DECISION_DATA["budget"]
    misspelled = verify_program(code.replace("most_per=", "max_per="))
    assert "best_rows: no argument 'max_per'; it takes maximize, count, at_most, one_per, minimize" in messages(
        misspelled
    )


def test_a_program_printing_a_python_literal_is_read_as_json():
    verdict = verify_program(GREEDY.replace("print(json.dumps(", "print((").replace("}))", "}))"))
    assert verdict.valid, messages(verdict)


def test_a_plan_that_breaks_a_rule_fails_with_the_true_numbers():
    verdict = verify_program('print(json.dumps({"selected_ids": [47, 107, 34]}))\n')
    assert not verdict.valid
    assert "budget_check failed: total cost 4,720 is 1,120 over the budget 3,600" in messages(verdict)
    assert verdict.quality is None  # no quality for a plan that failed the pack


@pytest.mark.parametrize("name", sorted(DECISION_HOSTILE_PROGRAMS))
def test_hostile_decision_programs_are_refused(name):
    code, expected = DECISION_HOSTILE_PROGRAMS[name]
    if name == "another_requests_data":  # a first request's program leaves a global behind
        assert verify_program(
            'leaked_ids = [a["id"] for a in ctx["catalog"]][:3]\nprint(json.dumps({"selected_ids": leaked_ids}))\n'
        ).valid
    verdict = verify_program(code)
    assert not verdict.valid
    assert expected in messages(verdict), messages(verdict)


def test_a_program_that_changes_ctx_changes_nothing_the_rules_read():
    data = json.loads(json.dumps(DECISION_DATA))
    verify_program(DECISION_HOSTILE_PROGRAMS["mutates_ctx"][0], data)
    assert data == DECISION_DATA


def test_a_program_draft_is_never_judged_on_its_text_alone():
    """A draft of kind program without the program pack: its program runs (free text and structured alike)."""
    free = compile_rules("", [], {})
    printed = "Work it out.\n```python\nprint(6 * 7)\n```\nFinal answer: 41"
    verdict = verify(printed, free.rules_for("program"), "stop", None, {}, "program")
    assert verdict.valid and verdict.extracted_answer == "42" and "program passed: printed 42" in messages(verdict)
    as_prose = verify(printed, free.rules_for("prose"), "stop", None, {}, "prose")
    assert as_prose.extracted_answer == "41"  # a prose draft is read as before
    no_block = verify("Final answer: 42", free.rules_for("program"), "stop", None, {}, "program")
    assert not no_block.valid and "program failed: a program draft without a ```python block" in messages(no_block)
    structured = verify(
        '{"selected_ids": [1, 2, 3]}', rule_set().rules_for("program"), "stop", SCHEMA, DECISION_DATA, "program"
    )
    assert not structured.valid and "program failed: a program draft without a ```python block" in messages(structured)


def test_the_drafter_describes_the_data_s_shape_not_its_rows():
    data = ads.context()
    message = decision_user_message(ads.prompt(), data, "Sort the rows.", ads.OUTPUT_SCHEMA)
    first = data["catalog"][0]
    assert f"{first['id']} {first['cost']} " not in message  # the prompt's table is gone …
    assert "[100 data lines omitted: the program reads the same data from `ctx`]" in message
    assert (
        'ctx["catalog"]: a list of 100 dicts, each {"id": <int>, "category": <str>, "cost": <int>, "ctr": <float>}'
        in message
    )
    assert str(first["ctr"]) not in message  # … and no row is shown
    assert '`answer` looks like {"selected_ids": [<int>, ...]}' in message
    assert decision_prefill(data).endswith(
        'catalog = ctx["catalog"]  # a list of 100 dicts; each dict has the keys id, category, cost, ctr\n'
        'pool = ctx["pool"]  # a list of 100 ints\nbudget = ctx["budget"]  # 5000\npicks = ctx["picks"]  # 5\n'
    )


def test_short_tables_and_prose_lines_stay_in_the_question():
    question = "Pick one.\n1 2 3\n4 5 6\nThanks, 2 of us in 2026."
    assert without_data_rows(question) == question
    assert skeleton({"type": "object", "properties": {"a": {"enum": ["x"]}, "b": {"type": "number"}}}) == (
        '{"a": "x", "b": <number>}'
    )


def test_the_program_s_opening_is_the_same_whatever_order_the_data_arrived_in():
    data = ads.context()  # a protobuf Struct does not keep the client's order of keys: rows or entries
    reordered = {key: data[key] for key in reversed(list(data))}
    reordered["catalog"] = [dict(reversed(list(row.items()))) for row in data["catalog"]]
    assert decision_prefill(reordered) == decision_prefill(data)
    assert decision_user_message("q", reordered, "s", None) == decision_user_message("q", data, "s", None)


def test_the_program_prompt_states_the_answer_s_list_sizes_the_schema_fixes():
    offers = {"type": "array", "minItems": 3, "maxItems": 3}
    items = {"type": "array", "minItems": 2, "maxItems": 4}
    schema = {"type": "object", "properties": {"offers": offers, "items": items, "note": {"type": "string"}}}
    assert list_sizes(schema) == 'exactly 3 items in "offers" and 2 to 4 items in "items"'
    assert list_sizes({"type": "object", "properties": {"ids": {"type": "array", "minItems": 1}}}) == ""
    message = decision_user_message("Propose offers.", {"applicant": {}}, "any", schema)
    assert 'with exactly 3 items in "offers" and 2 to 4 items in "items". End with' in message
