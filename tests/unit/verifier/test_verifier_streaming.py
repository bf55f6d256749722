"""Streaming verification's prefix checks: a wrong equation fails its draft at the line it is on, as soon as
that line is complete; a structured answer's first ```json block is judged once closed; and never a draft the
full verification would accept."""

from __future__ import annotations

import json
import random
from pathlib import Path

from deliberate.verifier.arithmetic import check_arithmetic
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.rules import verify
from deliberate.verifier.streaming import ArithmeticPrefix, GrowingDraft, JsonFencePrefix
from deliberate_client.examples import ads

WRONG_ON_LINE_3 = "April: 48 clips.\nMay: 48 / 2 = 24 clips.\nTotal: 48 + 24 = 73 clips.\nFinal answer: 73\n"
ARITHMETIC = ConstraintSpec(index=0, kind="rule_pack", source="arithmetic")
# Real drafts of SmolLM2 and Qwen2.5-Coder on GSM8K and ad selection, committed with the judge's dataset.
JUDGE_DATASETS = Path(__file__).resolve().parents[3] / "bench/studies/judge"


def tokens_of(text: str, size: int = 3) -> list[str]:
    """The text in pieces of `size` characters, as a Drafter's deltas would bring it."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def fed(text: str, size: int = 3) -> tuple[GrowingDraft, list]:
    draft = GrowingDraft((ArithmeticPrefix(),))
    failures = [f for piece in tokens_of(text, size) if (f := draft.extend(piece, 1))]
    return draft, failures


def test_a_wrong_equation_fails_the_draft_at_the_end_of_its_line():
    draft, failures = fed(WRONG_ON_LINE_3)
    (failure,) = failures
    line_end = WRONG_ON_LINE_3.index("clips.\nFinal") + len("clips.\n")
    assert (failure.rule_id, failure.line, failure.chars) == ("arithmetic", 3, line_end)
    assert failure.tokens == -(-line_end // 3), "the delta that completed the line"
    assert "48 + 24 = 73 (actually 72)" in failure.message and "(line 3, char" in failure.message
    assert draft.failure is failure and draft.extend("more text\n", 1) is None, "reported once"


def test_an_incomplete_line_is_not_judged_until_its_newline_arrives():
    draft = GrowingDraft((ArithmeticPrefix(),))
    assert draft.extend("48 + 24 = 7", 1) is None  # "= 72" may still come
    assert draft.extend("2 clips", 1) is None
    assert draft.extend("\n", 1) is None, "48 + 24 = 72 is right"
    assert draft.extend("2 * 3 = 7", 1) is None
    failure = draft.extend(" apples\n", 1)
    assert failure is not None and failure.line == 2 and failure.tokens == 5


def test_a_prefix_failure_is_a_failure_of_the_whole_draft_too():
    rule_set = compile_rules("", [ARITHMETIC], {})
    _, failures = fed(WRONG_ON_LINE_3)
    assert failures
    full = verify(WRONG_ON_LINE_3, rule_set.rules)
    assert not full.valid and any(o.rule_id == "arithmetic" and not o.passed for o in full.outcomes)


def test_right_arithmetic_never_fails_on_any_prefix():
    right = "May: 48 / 2 = 24 clips.\nTotal: 48 + 24 = 72.\n10 / 4 = 2.5\nFinal answer: 72"
    for size in (1, 2, 5, 50):
        _, failures = fed(right, size)
        assert failures == []


def test_no_real_draft_fails_on_a_prefix_and_passes_the_full_arithmetic_check():
    """Every draft the models wrote for the judge's dataset, fed in random pieces: a prefix failure is always a
    failure of the whole draft (aborting never drops a draft the full check would keep)."""
    texts = {
        json.loads(line)["draft"]
        for name in ("judge-dataset/train.jsonl", "judge-dataset/validation.jsonl", "judge-dataset-qwen/train.jsonl")
        for line in (JUDGE_DATASETS / name).read_text().splitlines()
    }
    rng = random.Random(0)
    failed_early = []
    for text in texts:
        draft, cut = GrowingDraft((ArithmeticPrefix(),)), 0
        while cut < len(text) and draft.failure is None:
            step = rng.randint(1, 12)
            draft.extend(text[cut : cut + step], 1)
            cut += step
        if draft.failure is not None:
            failed_early.append(text)
            assert check_arithmetic(text).wrong, f"{draft.failure.message} but the whole draft passes: {text!r}"
    assert len(texts) > 2000 and len(failed_early) > 100, "the drafts hold wrong equations to find"


def test_only_a_hard_arithmetic_pack_checks_prefixes():
    assert compile_rules("", [ARITHMETIC], {}).prefix_checks == (ArithmeticPrefix(),)
    soft = ConstraintSpec(index=0, kind="rule_pack", source="arithmetic", soft=True)
    assert compile_rules("", [soft], {}).prefix_checks == ()
    assert compile_rules("", [], {}).prefix_checks == ()


# --------------------------------------------------------------------------------------------------
# A structured answer: the first ```json block, once closed
# --------------------------------------------------------------------------------------------------

SCHEMA = json.dumps(
    {"type": "object", "properties": {"ad_ids": {"type": "array", "items": {"type": "string"}}}, "required": ["ad_ids"]}
)
OFF_SCHEMA = 'I pick these.\n```json\n{"ad_ids": [3, 4]}\n```\nThey fit the budget.\n'
UNPARSEABLE = "```json\nthe ids are a3 and a4\n```\nDone.\n"
RIGHT = '```json\n{"ad_ids": ["a3", "a4"]}\n```\n'


def fed_json(text: str, schema: str = SCHEMA, size: int = 3) -> list:
    draft = GrowingDraft(compile_rules(schema, [], {}).prefix_checks)
    return [f for piece in tokens_of(text, size) if (f := draft.extend(piece, 1))]


def test_a_closed_json_block_off_its_schema_fails_at_the_closing_fence():
    (failure,) = fed_json(OFF_SCHEMA)
    fence_end = OFF_SCHEMA.index("```\nThey") + len("```\n")
    assert (failure.rule_id, failure.chars, failure.line) == ("json_schema", fence_end, 4)
    assert failure.message.startswith("json_schema failed")


def test_a_closed_json_block_that_does_not_parse_fails_json_parse():
    (failure,) = fed_json(UNPARSEABLE)
    assert failure.rule_id == "json_parse" and failure.chars == UNPARSEABLE.index("Done")


def test_a_json_prefix_failure_is_a_failure_of_the_whole_draft_even_if_a_right_block_follows():
    """The first ```json block is the answer the full check reads: a later, right block does not replace it."""
    rule_set = compile_rules(SCHEMA, [], {})
    for text in (OFF_SCHEMA, OFF_SCHEMA + RIGHT):
        assert fed_json(text)
        full = verify(text, rule_set.rules, "stop", rule_set.output_schema)
        assert any(o.rule_id == "json_schema" and not o.passed for o in full.outcomes)


def test_json_is_not_judged_before_it_is_final():
    assert fed_json('```json\n{"ad_ids": [3, 4]}\n') == [], "unclosed: the draft may be cut, and repaired"
    assert fed_json('{"ad_ids": [3, 4]}\n') == [], "no fence: a later ```json block would win"
    assert fed_json('```\n{"ad_ids": [3, 4]}\n```\n') == [], "unlabelled: a later ```json block would win"
    for size in (1, 4, 50):
        assert fed_json("Here:\n" + RIGHT + "Done.", size=size) == []


def test_a_structured_answer_gets_the_json_prefix_check():
    assert any(isinstance(c, JsonFencePrefix) for c in compile_rules(SCHEMA, [], {}).prefix_checks)
    assert compile_rules("", [ARITHMETIC], {}).prefix_checks == (ArithmeticPrefix(),), "free text: none"


def test_json_prefix_failures_agree_with_the_full_check_on_composed_drafts():
    """Drafts composed at random from prose, fences and JSON pieces: whenever the prefix check fails one, the full
    verification fails it on the same rule."""
    pieces = [
        *("Here you go.\n", "```json\n", "```\n", "```JSON\n", '{"ad_ids": ["a1"]}\n', '{"ad_ids": [1]}\n'),
        *("{'ad_ids': ['a2'],}\n", "[1, 2]\n", "not json\n", '{"x": 1}\n', "``` \n", "Final answer: a1\n"),
    ]
    rule_set = compile_rules(SCHEMA, [], {})
    rng = random.Random(13)
    failed = 0
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
        failures = fed_json(text, size=rng.randint(1, 9))
        if failures:
            failed += 1
            full = verify(text, rule_set.rules, "stop", rule_set.output_schema)
            assert any(o.rule_id == failures[0].rule_id and not o.passed for o in full.outcomes), text
    assert failed > 50, "the composition reaches the check"


# --------------------------------------------------------------------------------------------------
# The hard constraints that read the answer alone, on the closed block
# --------------------------------------------------------------------------------------------------


def ad_constraints(*extra: ConstraintSpec) -> list[ConstraintSpec]:
    """The ad example's constraints: two CEL expressions over the plan and the ad-selection pack."""
    return [
        ConstraintSpec(0, "cel_expression", "size(plan.selected_ids) == 5", id="size_check"),
        ConstraintSpec(1, "cel_expression", "plan.selected_ids.all(i, i in ctx.pool)", id="pool_check"),
        ConstraintSpec(2, "rule_pack", "ad_selection", params={"budget": ads.BUDGET}),
        *extra,
    ]


def plan_draft(ids: list[int]) -> str:
    return f"Cheapest first.\n```json\n{json.dumps({'selected_ids': ids})}\n```\nThese fit, I think.\n"


def fed_plan(
    text: str, constraints: list[ConstraintSpec], size: int = 4, schema: dict = ads.OUTPUT_SCHEMA
) -> tuple[list, object]:
    context = {"pool": [ad.id for ad in ads.load_catalog()]}
    rule_set = compile_rules(json.dumps(schema) if schema else "", constraints, context)
    draft = GrowingDraft(rule_set.prefix_checks)
    failures = [f for piece in tokens_of(text, size) if (f := draft.extend(piece, 1))]
    return failures, verify(text, rule_set.rules, "stop", rule_set.output_schema, context)


def catalog_plan(over_budget: bool) -> list[int]:
    """Five ids of five categories: the dearest of each, or the cheapest."""
    by_category: dict[str, list] = {}
    for ad in ads.load_catalog():
        by_category.setdefault(ad.category, []).append(ad)
    picks = [max(group, key=lambda a: a.cost) if over_budget else min(group, key=lambda a: a.cost)
             for group in list(by_category.values())[:5]]  # fmt: skip
    assert (sum(a.cost for a in picks) > ads.BUDGET) == over_budget
    return [a.id for a in picks]


def test_a_plan_over_budget_fails_the_pack_at_the_closing_fence():
    text = plan_draft(catalog_plan(over_budget=True))
    (failure,), full = fed_plan(text, ad_constraints())
    assert failure.rule_id == "budget_check" and failure.chars == text.index("These")
    assert not full.valid and any(o.rule_id == "budget_check" and not o.passed for o in full.outcomes)


def test_a_cel_constraint_on_the_plan_fails_at_the_closing_fence():
    text = plan_draft(catalog_plan(over_budget=False) + [999_999])  # six ids, one not in the pool
    schemaless = [ConstraintSpec(0, "cel_expression", "plan.selected_ids.all(i, i in ctx.pool)", id="pool_check")]
    context = {"pool": [ad.id for ad in ads.load_catalog()]}
    rule_set = compile_rules("", schemaless, context)
    draft = GrowingDraft(rule_set.prefix_checks)
    (failure,) = [f for piece in tokens_of(text, 5) if (f := draft.extend(piece, 1))]
    assert failure.rule_id == "pool_check" and failure.line == 4
    assert not verify(text, rule_set.rules, "stop", None, context).valid


def test_a_good_plan_and_what_needs_the_text_or_is_soft_are_left_to_the_end():
    good = plan_draft(catalog_plan(over_budget=False))
    assert fed_plan(good, ad_constraints())[0] == []
    wordy = ConstraintSpec(3, "cel_expression", "size(text) < 10 && size(plan.selected_ids) == 5", id="short")
    soft = ConstraintSpec(4, "cel_expression", "size(plan.selected_ids) == 4", id="four", soft=True)
    failures, full = fed_plan(good, ad_constraints(wordy, soft))
    assert failures == [], "reads the text (not final) / soft: never judged on a prefix"
    assert {o.rule_id for o in full.outcomes if not o.passed} >= {"short"}


def test_constraint_prefix_failures_agree_with_the_full_check_on_composed_plans():
    """Plans composed at random from the catalog, stray ids and prose: every prefix failure is a failure of the
    full verification on the same rule, and the schema, CEL and pack rules all get their turn."""
    catalog = [ad.id for ad in ads.load_catalog()]
    rng = random.Random(29)
    failed_by: dict[str, int] = {}
    for _ in range(300):
        ids = rng.sample(catalog, rng.choice([4, 5, 5, 5, 6])) + ([123_456] if rng.random() < 0.2 else [])
        text = rng.choice(["", "Picking.\n"]) + plan_draft(ids) + rng.choice(["", "Final answer: done\n"])
        schema = ads.OUTPUT_SCHEMA if rng.random() < 0.5 else {}  # without it, the size is CEL's to check
        failures, full = fed_plan(text, ad_constraints(), size=rng.randint(1, 9), schema=schema)
        if failures:
            rule_id = failures[0].rule_id
            failed_by[rule_id] = failed_by.get(rule_id, 0) + 1
            assert any(o.rule_id == rule_id and not o.passed for o in full.outcomes), text
    assert {"json_schema", "size_check", "pool_check", "budget_check", "category_check"} <= set(failed_by), failed_by
