"""Every business answer judged by the evaluation itself, as the Verifier's rule pack would judge it, in process:
its schema, its CEL rules and the pack's checks, and the objective against the exact optimum — the ad pack's on the
examples' split, the evaluation's own (`varied_references`) on the varied split, whose rules the packs do not know."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from types import SimpleNamespace

import cel
import jsonschema
from pydantic import ValidationError

from deliberate.decisions.packs import Abstained, PackContext, decision_data, registry
from deliberate.risk.client import RiskRejected
from deliberate.risk.model import InvalidInput, score
from deliberate.verifier.cel_rules import FUNCTIONS as CEL_FUNCTIONS
from deliberate.verifier.parsing import extract_json
from deliberate_bench.eval import business_instances as bi
from deliberate_bench.eval import varied_references


def total_ctr(pack, answer) -> float:
    return round(sum(pack.ads[i].ctr for i in answer.selected_ids), 6)


def total_cost(pack, answer) -> float:
    return float(sum(pack.ads[i].cost for i in answer.selected_ids))


def total_amount(pack, answer) -> float:
    return sum(offer.amount for offer in answer.offers)


def gross_profit(pack, answer) -> float:
    lines = pack.lines(answer)
    return round(float(sum((x.revenue - x.cost for x in lines), Fraction(0))), 2)


OBJECTIVES = {"ads": total_ctr, "credit": total_amount, "promotion": gross_profit}


@dataclass(frozen=True)
class Judgement:
    feasible: bool
    check: str  # the first constraint missed, or what the plan achieves
    objective: float | None = None  # of a feasible plan
    bound: float | None = None  # the best objective any plan of the instance reaches, where known
    minimize: bool = False  # the objective is a cost (a varied ad request with a CTR floor)

    @property
    def ratio(self) -> float | None:
        """How close to the bound a feasible plan comes, 1 at it (objective / bound, or bound / objective for a
        cost), 0 for an infeasible one; None without a bound."""
        if self.bound is None:
            return None
        if not self.feasible or self.objective is None:
            return 0.0
        if self.minimize:
            return 1.0 if self.objective <= 0 else round(self.bound / self.objective, 6)
        return 1.0 if self.bound <= 0 else round(self.objective / self.bound, 6)


def judge(instance: bi.Instance, text: str | None) -> Judgement:
    """Whether the answer satisfies every constraint of its request, and how good a plan it is."""
    pack = build_pack(instance, pack_constraint(instance))
    minimize = instance.meta.get("objective") == "min_cost"
    bound = bound_of(instance, pack)
    failed = partial(Judgement, False, bound=bound, minimize=minimize)
    plan, error = extract_json(text or "")
    if error is not None or not isinstance(plan, dict):
        return failed(f"no JSON object: {error or type(plan).__name__}")
    missed = schema_error(instance.output_schema, plan) or cel_failure(instance, plan)
    if missed:
        return failed(missed)
    try:
        answer = pack.answer_model.model_validate(plan)
    except ValidationError as failure:
        return failed(f"{pack.name}: {failure.errors()[0]['msg']}")
    for rule_id, method in pack.checks():
        result = getattr(pack, method)(answer)
        if isinstance(result, Abstained):
            continue
        passed, detail = result
        if not passed:
            return failed(f"{rule_id}: {detail}")
    objective = (total_cost if minimize else OBJECTIVES[instance.case])(pack, answer)
    return Judgement(True, f"feasible, objective {objective:.6g}", objective, bound, minimize)


def bound_of(instance: bi.Instance, pack) -> float | None:
    """The best objective of the instance: on the varied split its own reference plan's (None when no plan fits),
    else the pack's exact optimum where it solves one (the ad pack)."""
    if not varied_references.is_varied(instance):
        return optimum_of(pack)
    plan = varied_references.cached_reference(instance)
    if plan is None:
        return None
    answer = pack.answer_model.model_validate(plan)
    return (total_cost if instance.meta.get("objective") == "min_cost" else OBJECTIVES[instance.case])(pack, answer)


def build_pack(instance: bi.Instance, constraint: dict):
    """The instance's rule pack as the Verifier builds it: params over context, its declared services resolved."""
    pack_class = registry()[constraint["rulePack"]]
    params = pack_class.params_model.model_validate({**instance.context, **constraint.get("params", {})})
    offered = {"risk": RiskModelInProcess(), "reference": None}
    services = {name: offered.get(name) for name in (*pack_class.requires, *pack_class.uses)}
    return pack_class(params, PackContext(services)).snapshot()


def pack_constraint(instance: bi.Instance) -> dict:
    return next(c for c in instance.constraints if "rulePack" in c)


def program_data(instance: bi.Instance) -> dict:
    """What the instance's decision programs read as `ctx`: its context and its pack's data params."""
    constraint = pack_constraint(instance)
    packs = [SimpleNamespace(kind="rule_pack", source=constraint["rulePack"], params=constraint.get("params", {}))]
    return decision_data(instance.context, packs)


def optimum_of(pack) -> float | None:
    """The pack's exact optimum where it solves one (the ad pack), else None."""
    reference = pack.reference_answer()
    if reference is None:
        return None
    quality = pack.quality(pack.answer_model.model_validate(reference))
    return None if quality is None else quality.bound


def schema_error(schema: dict, plan: dict) -> str | None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(plan))
    if error is None:
        return None
    where = "/".join(map(str, error.absolute_path)) or "answer"
    return f"output schema: {where}: {error.message[:200]}"


def cel_failure(instance: bi.Instance, plan: dict) -> str | None:
    """The first of the request's CEL constraints the plan fails, with the Verifier's CEL library."""
    context = cel.Context()
    context.add_variable("ctx", instance.context)
    context.add_variable("plan", plan)
    context.add_variable("answer", plan)
    for name, function in CEL_FUNCTIONS.items():  # the Verifier's additions to CEL (`sum`)
        context.add_function(name, function)
    for constraint in instance.constraints:
        if "celExpression" not in constraint:
            continue
        try:
            result = cel.compile(constraint["celExpression"]).execute(context)
        except Exception as error:  # the Rust core raises for missing fields and type errors
            result = error
        if result is not True:
            return f"{constraint['id']}: {constraint.get('failureMessage') or result}"
    return None


class RiskModelInProcess:
    """Stands in for the risk service's client in the credit pack: the same deterministic model, called here."""

    def score_all(self, applicant, offers) -> list:
        results = []
        for offer in offers:
            try:
                results.append(score(applicant, offer))
            except InvalidInput as error:  # what the service answers as INVALID_ARGUMENT
                results.append(RiskRejected(str(error)))
        return results
