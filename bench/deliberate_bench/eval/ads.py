"""The ad-selection task of `deliberate bench eval`: a generated catalog, its request, and the plan checked here from
the catalog, independently of the Verifier."""

from __future__ import annotations

import json

from deliberate.verifier.parsing import extract_json
from deliberate_bench.eval.calls import Settings, single_pass, solve_both_ways
from deliberate_bench.eval.services import Services
from deliberate_client.client import build_request


def ad_instance(seed: int, size: int = 100):
    from deliberate_client.examples import ads

    catalog = ads.generate_catalog(seed, size)
    constraints = [dict(c) for c in ads.CONSTRAINTS]
    for c in constraints:
        if c.get("rulePack") == "ad_selection":  # the Verifier must check this catalog, not the shipped one
            c["params"] = {"budget": ads.BUDGET, "catalog": [ad.to_dict() for ad in catalog]}
    return catalog, ads.prompt(catalog), json.dumps(ads.OUTPUT_SCHEMA), constraints, ads.context(catalog)


def check_ad_plan(text: str | None, catalog, budget: float | None = None, picks: int | None = None) -> tuple[bool, str]:
    """Does the answer satisfy every constraint of the ad task? Checked here from the catalog, independently of
    the Verifier: JSON with `selected_ids`, exactly `picks` distinct ids, all in the catalog, total cost within
    budget, no two ads of one category."""
    from deliberate_client.examples import ads

    budget = ads.BUDGET if budget is None else budget
    picks = ads.PICKS if picks is None else picks
    value, error = extract_json(text or "")
    if error is not None or not isinstance(value, dict):
        return False, f"no JSON object: {error or type(value).__name__}"
    ids = value.get("selected_ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return False, "selected_ids is not a list of integers"
    if len(ids) != picks or len(set(ids)) != picks:
        return False, f"{len(set(ids))} distinct ids of {len(ids)}, need {picks}"
    by_id = {ad.id: ad for ad in catalog}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        return False, f"ids not in the catalog: {unknown}"
    total = sum(by_id[i].cost for i in ids)
    if total > budget:
        return False, f"cost {total} > {budget:g}"
    categories = [by_id[i].category for i in ids]
    if len(set(categories)) != len(categories):
        return False, "two ads of one category"
    return True, f"cost {total}, ctr {sum(by_id[i].ctr for i in ids):.4f}"


def run_ads(services: Services, s: Settings, seed: int, size: int) -> dict:
    catalog, prompt, schema, constraints, context = ad_instance(seed, size)
    single = single_pass(services, s, f"eval-ads-{seed}-single", prompt, schema)
    request = build_request(
        prompt,
        num_drafts=s.largest,
        max_new_tokens=s.max_new_tokens,
        refine_max_new_tokens=s.refine_max_new_tokens,
        temperature=s.temperature,
        seed=s.seed,
        output_schema=schema,
        context=context,
        constraints=constraints,
        request_id=f"eval-ads-{seed}",
        draft_count="all_at_once",  # pipeline@N: a round of N drafts, as the committed runs recorded
    )
    solved, _, without = solve_both_ways(services, s, request)
    parts = [single, solved] + ([] if without is None else [without])
    for part in parts:
        part["satisfied"], part["check"] = check_ad_plan(part.get("text", part.get("answer_text")), catalog)
    solved.pop("drafts", None)  # the plans are in answer_text; draft texts would only bloat the file
    return {
        "task": "ads",
        "id": f"ads:{seed}",
        "catalog_seed": seed,
        "catalog_size": size,
        "single": single,
        "solve": solved,
    } | ({} if without is None else {"solve_without_early_stop": without})
