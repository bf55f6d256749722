"""`make eval-business`'s pure parts: the instances of the three business cases (deterministic, varied, feasible,
tuning apart from scored), the evaluation's own judgement of a plan, and the summary's figures."""

from __future__ import annotations

import json
from functools import cache

import pytest

from deliberate.risk.model import Offer
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.eval import business_instances as bi
from deliberate_bench.eval.business_eval import Settings, reference_row, request_for
from deliberate_bench.eval.business_judge import judge
from deliberate_bench.eval.business_summary import markdown, row_summary, summary
from deliberate_bench.eval.stats import wilson


@cache
def scored(case: str) -> tuple[bi.Instance, ...]:
    return tuple(bi.instances(case))


# --- the instances ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", bi.CASES)
def test_instances_are_deterministic(case):
    again = bi.instances(case)
    assert [i.to_dict() for i in again] == [i.to_dict() for i in scored(case)]


@pytest.mark.parametrize("case", bi.CASES)
def test_a_quarter_is_kept_for_tuning_apart_from_the_scored(case):
    tuning = bi.instances(case, "tuning")
    assert len(scored(case)) == bi.SCORED[case]
    assert len(tuning) * 3 == bi.SCORED[case]
    assert not {i.id for i in tuning} & {i.id for i in scored(case)}
    assert {i.split for i in scored(case)} == {"scored"} and {i.split for i in tuning} == {"tuning"}
    assert [i.id for i in bi.instances(case)[:5]] == [i.id for i in scored(case)[:5]]  # a limit takes a prefix


def test_enough_scored_instances_per_case():
    assert len(scored("ads")) >= 60 and len(scored("credit")) >= 40 and len(scored("promotion")) >= 30


def test_ad_catalogs_vary_in_every_way_the_evaluation_needs():
    metas = [i.meta for i in scored("ads")]
    sizes = [m["size"] for m in metas]
    assert min(sizes) >= 30 and max(sizes) <= 120 and max(sizes) - min(sizes) >= 50
    assert {m["picks"] for m in metas} == {3, 4, 5, 6, 7}
    assert {m["one_per_category"] for m in metas} == {True, False}
    assert len({m["category_names"] for m in metas}) >= 4
    assert len({m["template"] for m in metas}) >= 3 and len({m["format"] for m in metas}) >= 2
    assert len({m["budget"] for m in metas}) >= 30


def test_ad_instances_carry_the_catalog_pool_budget_and_constraints():
    for instance in scored("ads"):
        catalog, picks = instance.context["catalog"], instance.meta["picks"]
        ids = [ad["id"] for ad in catalog]
        assert len(set(ids)) == len(ids) and ids != list(range(1, len(ids) + 1)) and min(ids) >= 100
        assert instance.context["pool"] == ids and instance.context["budget"] == instance.meta["budget"]
        size, pool, pack = instance.constraints
        assert size["celExpression"] == f"size(plan.selected_ids) == {picks}"
        assert pool["celExpression"] == "plan.selected_ids.all(i, i in ctx.pool)"
        assert pack == {"rulePack": "ad_selection", "params": {"budget": instance.meta["budget"], "picks": picks,
                        "one_per_category": instance.meta["one_per_category"]}}  # fmt: skip
        assert instance.output_schema["properties"]["selected_ids"]["minItems"] == picks
        assert str(instance.meta["budget"]) in instance.prompt and str(ids[-1]) in instance.prompt


def test_credit_and_promotion_vary():
    credit = scored("credit")
    applicants = [i.context["applicant"] for i in credit]
    assert len({a["annual_income"] for a in applicants}) >= 30
    assert len({a["credit_score"] for a in applicants}) >= 30
    assert any(a["collateral_value"] for a in applicants) and any(not a["collateral_value"] for a in applicants)
    assert {i.meta["offers"] for i in credit} >= {3} and len({i.meta["template"] for i in credit}) >= 3
    assert all(i.constraints == [{"rulePack": "credit"}] and i.context["disclosure"] in i.prompt for i in credit)
    promotion = scored("promotion")
    assert {len(i.context["products"]) for i in promotion} >= {5, 10}
    assert len({i.meta["template"] for i in promotion}) >= 3
    assert len({json.dumps(i.constraints) for i in promotion}) == len(promotion)


# --- every instance is feasible -----------------------------------------------------------------


def test_every_ad_instance_has_an_optimum_within_its_rules():
    for instance in scored("ads") + tuple(bi.instances("ads", "tuning")):
        meta = instance.meta
        cheapest = bi.cheapest_plan_cost(instance.context["catalog"], meta["picks"], meta["one_per_category"])
        assert cheapest <= meta["budget"], instance.id
        reference = reference_row(instance)
        assert reference["feasible"], (instance.id, reference["check"])
        assert reference["objective_ratio"] == 1.0


def test_every_applicant_has_a_passing_grid_offer_and_a_feasible_reference():
    for instance in scored("credit"):
        applicant = instance.context["applicant"]
        grid = [Offer(bi.CREDIT_MIN_AMOUNT, rate, term) for rate in bi.CREDIT_RATES for term in bi.CREDIT_TERMS]
        assert any(bi.offer_passes(applicant, offer) for offer in grid), instance.id
        reference = reference_row(instance)
        assert reference["feasible"], (instance.id, reference["check"])
        assert len(json.loads(reference["answer"])["offers"]) == instance.meta["offers"]


def test_every_product_table_has_a_plan_that_passes_the_pack():
    for instance in scored("promotion"):
        reference = reference_row(instance)
        assert reference["feasible"], (instance.id, reference["check"])
        assert reference["objective"] > 0


# --- the evaluation's judgement -----------------------------------------------------------------


def test_the_judgement_reads_the_request_not_the_status():
    instance = scored("ads")[0]
    optimum = json.loads(reference_row(instance)["answer"])
    assert judge(instance, json.dumps(optimum)).ratio == 1.0
    assert not judge(instance, "no plan here").feasible
    too_few = {"selected_ids": optimum["selected_ids"][:-1]}
    assert "output schema" in judge(instance, json.dumps(too_few)).check
    outside = {"selected_ids": [*optimum["selected_ids"][:-1], 99]}
    assert not judge(instance, json.dumps(outside)).feasible
    credit = scored("credit")[0]
    plan = json.loads(reference_row(credit)["answer"])
    plan["disclosure"] = "no disclosure"
    assert judge(credit, json.dumps(plan)).check.startswith("disclosure_check")


# --- the summary --------------------------------------------------------------------------------


def record(
    instance_id: str,
    row: str,
    feasible: bool | None,
    status: str | None = "VERIFIED",
    ratio: float | None = None,
    latency: float = 1.0,
    tokens: int | None = 10,
    error: str | None = None,
) -> dict:
    return {"case": "ads", "id": instance_id, "split": "scored", "row": row, "feasible": feasible, "status": status,
            "objective_ratio": ratio, "objective": ratio, "latency_s": latency, "tokens": tokens, "error": error,
            "settings": {"model": "m", "engine": "e"}}  # fmt: skip


def test_row_summary_figures_on_a_hand_made_runs_list():
    runs = [
        record("a", "pipeline", True, ratio=1.0, latency=1.0),
        record("b", "pipeline", True, ratio=0.5, latency=2.0),
        record("c", "pipeline", False, ratio=0.0, latency=3.0),  # VERIFIED yet infeasible
        record("d", "pipeline", False, status="UNVERIFIED", ratio=0.0, latency=4.0),
        record("e", "pipeline", False, status=None, ratio=0.0, latency=5.0, tokens=None, error="INVALID_ARGUMENT: x"),
    ]
    x = row_summary(runs)
    assert x["instances"] == 5 and x["feasible"] == 2
    assert x["feasible_share"] == 0.4
    assert x["feasible_ci_low"] == round(wilson(2, 5)[0], 4) == 0.1176
    assert x["objective_ratio_mean"] == 0.3
    assert x["objective_ratio_p10"] == 0.0
    assert x["verified_infeasible"] == 1 and x["errors"] == 1
    assert x["latency_p50_s"] == 3.0 and x["latency_p95_s"] == 4.8
    assert x["tokens_mean"] == 10.0


def test_p10_interpolates_and_a_row_without_bound_has_no_ratio():
    ratios = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0]
    x = row_summary([record(str(k), "single", r > 0, ratio=r) for k, r in enumerate(ratios)])
    assert x["objective_ratio_p10"] == 0.5  # position 0.1 · 10 = 1
    unbounded = row_summary([record("a", "single", True), record("b", "single", False)])
    assert unbounded["objective_ratio_mean"] is None and unbounded["objective_ratio_p10"] is None
    assert row_summary([record("a", "reference", None)])["feasible_share"] is None


def test_summary_takes_the_last_record_per_pair_and_one_key_per_case():
    runs = [record("a", "single", False, error="UNAVAILABLE: gone"), record("a", "single", True, ratio=1.0)]
    result = summary(runs)
    assert set(result) >= {"ads", "commands", "model"} and "credit" not in result
    assert result["ads"]["instances"] == 1
    assert set(result["ads"]["rows"]) == {"single", "single:program", "template", "pipeline", "cascade", "reference"}
    assert result["ads"]["rows"]["single"]["feasible_share"] == 1.0


def test_each_deliberating_row_says_its_median_latency_over_one_decision_programs():
    runs = [record("a", "single:program", True, latency=10.0), record("a", "cascade", True, latency=12.0),
            record("a", "reference", True, latency=0.01, tokens=None)]  # fmt: skip
    rows = summary(runs)["ads"]["rows"]
    assert rows["cascade"]["latency_p50_vs_single_program"] == 1.2
    assert rows["reference"]["latency_p50_vs_single_program"] is None, "no model: nothing to compare"
    assert "ads `cascade` 1.2×" in markdown(summary(runs))


def test_the_cascade_row_asks_for_the_default_and_the_pipeline_row_for_its_round_all_at_once():
    instance = bi.instances("ads", "scored")[0]
    settings = Settings(2026, None, None, 5, 60.0, "llamacpp", "m")
    cascade, pipeline = request_for(instance, "cascade", settings), request_for(instance, "pipeline", settings)
    assert (cascade.num_drafts, cascade.draft_count) == (0, pb.DRAFT_COUNT_CASCADE)
    assert (pipeline.num_drafts, pipeline.draft_count) == (5, pb.DRAFT_COUNT_ALL_AT_ONCE)
