"""The varied business split (deliberate_bench.eval.varied_instances): rules beyond the packs' worked examples, stated
in words and as the request's CEL; its optimum computed apart (varied_references) and agreeing with the services'
exact engine where both can state the rules."""

from __future__ import annotations

import json

import pytest

from deliberate.decisions.solver import NoSelection, best_rows
from deliberate_bench.eval import varied_instances as vi
from deliberate_bench.eval import varied_references as vr
from deliberate_bench.eval.business_judge import judge

SCORED = [instance for case in vi.GENERATORS for instance in vi.instances(case)]
TUNING = [instance for case in vi.GENERATORS for instance in vi.instances(case, "tuning")]


def test_at_least_60_scored_instances_apart_from_the_tuning_ones_and_the_same_each_time():
    assert len(SCORED) >= 60
    assert not {i.id for i in SCORED} & {i.id for i in TUNING}
    assert [i.to_dict() for i in vi.instances("credit")] == [i.to_dict() for i in SCORED if i.case == "credit"]


def test_each_instance_mixes_one_to_three_rules_stated_in_words_and_as_cel():
    for instance in SCORED:
        kinds = vi.rule_kinds(instance)
        assert 1 <= len(kinds) <= 3, (instance.id, kinds)
        stated = [c for c in instance.constraints if c.get("id", "").rsplit("_", 1)[0] in {*kinds, "base_step"}]
        assert len(stated) == len(instance.meta["rules"])
        assert all(c["failureMessage"] in instance.prompt for c in stated), instance.id


def test_every_rule_kind_the_issue_lists_is_drawn():
    drawn = {kind for instance in SCORED for kind in vi.rule_kinds(instance)}
    assert drawn == {*vi.AD_RULE_KINDS, *vi.CREDIT_RULE_KINDS, *vi.PROMOTION_RULE_KINDS}


def test_the_reference_passes_every_rule_and_some_instances_have_no_plan():
    infeasible = 0
    for instance in SCORED:
        plan = vr.reference(instance)
        if plan is None:
            infeasible += 1
            continue
        judged = judge(instance, json.dumps(plan))
        assert judged.feasible, (instance.id, judged.check)
    assert 0.05 <= infeasible / len(SCORED) <= 0.25


@pytest.mark.parametrize("instance", [i for i in SCORED if i.case == "ads"], ids=lambda i: i.id)
def test_the_ad_reference_agrees_with_the_services_exact_engine(instance):
    """Two formulations written apart — the evaluation's milp model and `best_rows` with its keyword rules — reach
    the same optimum, or both find none."""
    plan = vr.reference(instance)
    catalog = instance.context["catalog"]
    rules = {rule["kind"]: rule for rule in instance.meta["rules"]}
    rows = [ad for ad in catalog if ad["cost"] <= rules.get("cost_cap", {}).get("cap", float("inf"))]
    count = instance.meta["picks"]
    if "count_range" in rules:
        count = [rules["count_range"]["low"], rules["count_range"]["high"]]
    elif "as_many_as_fit" in rules:
        count = [1, None]
    minimize = "ctr_floor_min_cost" in rules
    arguments = {
        "count": count,
        "at_most": {"cost": instance.meta["budget"],
                    **({"impressions": rules["impressions_limit"]["limit"]} if "impressions_limit" in rules else {})},
        "most_per": {"category": rules["most_per_category"]["k"]} if "most_per_category" in rules else None,
        "least_of": {"category": {rules["at_least_one_of"]["category"]: 1}} if "at_least_one_of" in rules else None,
        "include": {"id": rules["include"]["ids"]} if "include" in rules else None,
        "exclude": {**({"category": rules["exclude_categories"]["categories"]} if "exclude_categories" in rules
                       else {}), **({"id": rules["exclude_ids"]["ids"]} if "exclude_ids" in rules else {})} or None,
        "at_least": {"ctr": rules["ctr_floor_min_cost"]["floor"]} if minimize else None,
    }  # fmt: skip
    objective = "cost" if minimize else "ctr"
    try:
        chosen = best_rows(rows, **({"minimize": "cost"} if minimize else {"maximize": "ctr"}), **arguments)
    except NoSelection:
        assert plan is None
        return
    assert plan is not None
    by_id = {ad["id"]: ad for ad in catalog}
    total = sum(by_id[i][objective] for i in plan["selected_ids"])
    assert total == pytest.approx(sum(rows[k][objective] for k in chosen), abs=1e-9)


def test_the_worked_examples_alone_rarely_fit_the_varied_split_nor_the_packs_requests():
    """The `template` row: the prompt's example program run with no model. The exact engine's example still has
    the shape of every scored ad request of the examples' split; the packs' examples no longer answer their own
    evaluation (issue 55: credit asks 2 or 3 offers, the example gives one; the promotion example's one discount,
    one product per category and half the stock), and the varied split must measure more than copying (at most 20 %)."""
    from deliberate_bench.eval import business_instances as bi
    from deliberate_bench.eval.templates import template_answer

    def feasible_share(instances) -> float:
        return sum(judge(i, template_answer(i)[0]).feasible for i in instances) / len(instances)

    assert feasible_share(bi.instances("ads")) == 1.0
    assert feasible_share(bi.instances("credit")) == 0.0
    assert feasible_share(bi.instances("promotion")) == 12 / 30  # docs/business-cases.md cites it
    solvable = [i for i in SCORED if vr.reference(i) is not None]
    assert feasible_share(solvable) <= 0.20


def test_the_summary_counts_instances_no_plan_solves_apart_and_per_rule_kind():
    from deliberate_bench.eval.business_summary import summary

    def record(instance_id, row, feasible, status, solvable, kinds=("include",)):
        return {"case": "ads", "id": instance_id, "split": "scored", "row": row, "feasible": feasible,
                "status": status, "solvable": solvable, "rule_kinds": list(kinds), "latency_s": 1.0}  # fmt: skip

    records = [record("a", "pipeline", True, "VERIFIED", True), record("b", "pipeline", False, "UNVERIFIED", True),
               record("c", "pipeline", False, "UNVERIFIED", False), record("d", "pipeline", False, "VERIFIED", False,
                                                                              ("cost_cap",))]  # fmt: skip
    pipeline = summary(records)["ads"]["rows"]["pipeline"]
    assert pipeline["instances"] == 2 and pipeline["feasible_share"] == 0.5
    assert (
        pipeline["unsolvable"] == 2 and pipeline["unsolvable_unverified"] == 1 and pipeline["verified_infeasible"] == 1
    )
    kinds = summary(records)["ads"]["rule_kinds"]
    assert kinds["include"] == {"instances": 2, "feasible_share": {"pipeline": 0.5}}
    assert kinds["cost_cap"] == {"instances": 0, "feasible_share": {}}


def test_the_summary_counts_misses_by_the_rule_each_answer_broke_first():
    from deliberate_bench.eval.business_summary import markdown, summary

    def missed(instance_id, check, solvable=True):
        return {"case": "ads", "id": instance_id, "split": "scored", "row": "cascade", "feasible": False,
                "status": "UNVERIFIED", "solvable": solvable, "rule_kinds": ["include", "count_range"],
                "check": check, "latency_s": 1.0}  # fmt: skip

    records = [missed("a", "include_1: the contracted ad 7 must be selected"), missed("b", "include_0: ..."),
               missed("c", "budget_check: total cost 2,595 is 445 over"), missed("d", "no JSON object: list"),
               missed("e", "count_range_0: between 3 and 5 ads", solvable=False)]  # fmt: skip
    result = summary(records)
    assert result["ads"]["misses_by_first_rule"] == {"cascade": {"include": 2, "budget_check": 1, "no plan": 1}}
    assert "| ads | `cascade` | 4 | include 2, budget_check 1, no plan 1 |" in markdown(result)
