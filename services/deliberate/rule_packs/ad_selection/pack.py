"""The ad-selection pack: true totals from the catalog, never from sums written in the draft.

Which ids may be picked at all (the pool) is the request's own CEL constraint, not the pack's business.
The catalog is, first found: the request's own (`catalog` in params or context), the reference store's
current version (when the Verifier has `--reference-url`: the service `reference` the pack uses), the catalog
shipped as package data (`catalog.py`).

Its failures state the figures and by how much the plan misses (`total cost 5,340 is 340 over the budget 5,000`):
they are the re-draft's feedback. A plan that passes is measured against the exact optimum (`optimum.py`), which
is also the reference answer offered when no draft is feasible.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from functools import cached_property
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from deliberate.decisions.packs import Abstained, CheckResult, Quality, RulePack, check

from .catalog import BUDGET, Ad, shipped_catalog
from .catalog_store import current_catalog
from .optimum import Optimum, best_plan

if TYPE_CHECKING:  # the store's module needs Redis; a pack loads without it (the Drafter reads pack prompts)
    from deliberate.decisions.reference import ReferenceStore


class AdPlan(BaseModel):
    model_config = ConfigDict(extra="ignore")
    selected_ids: list[StrictInt]

    @field_validator("selected_ids")
    @classmethod
    def no_repeats(cls, ids: list[int]) -> list[int]:
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"ids selected more than once: {repeated}")
        return ids


class AdSelectionParams(BaseModel):
    model_config = ConfigDict(extra="ignore")
    budget: float = Field(default=BUDGET, ge=0, allow_inf_nan=False)
    catalog: list[Ad] | None = None  # None: the reference store's catalog, else the one shipped with the project
    picks: int | None = Field(default=None, ge=1)  # exactly this many ads; None: any number
    one_per_category: bool = True  # the competitor rule: no two ads of one category


class AdSelectionPack(RulePack):
    name = "ad_selection"
    answer_model = AdPlan
    params_model = AdSelectionParams
    uses = ("reference",)
    # A decision program reads a catalog given in params as ctx["catalog"], and the rule's numbers beside it: a plan
    # of `ctx["picks"]` ads is one the program can count to (the recorded programs' commonest failure was the size).
    data_params = ("catalog", "budget", "picks", "one_per_category")
    exact_optimum = True  # `optimum`: the best plan within the rules, solved by `decisions.solver`

    @property
    def reference(self) -> ReferenceStore | None:
        return self.context["reference"]

    @property
    def waits_on_network(self) -> bool:
        return self.reference is not None and self.params.catalog is None

    def snapshot(self) -> AdSelectionPack:
        if not self.waits_on_network:
            return self
        ads = current_catalog(self.reference)  # one object per catalog version (catalog_store caches it)
        last = self.__dict__.get("last_snapshot")
        if last is not None and last.ads is ads:  # the same version as the last draft's: its optimum is solved
            return last
        pinned = copy.copy(self)
        for solved_elsewhere in ("optimum", "last_snapshot"):
            pinned.__dict__.pop(solved_elsewhere, None)
        pinned.ads = ads
        self.last_snapshot = pinned
        return pinned

    @cached_property
    def ads(self) -> dict[int, Ad]:
        return {ad.id: ad for ad in (self.params.catalog or shipped_catalog())}

    @cached_property
    def optimum(self) -> Optimum | None:
        """The best plan within the request's rules, solved once per pack (per catalog version); None if none fits."""
        p = self.params
        return best_plan(self.ads.values(), p.budget, p.picks, p.one_per_category)

    def quality(self, answer: AdPlan) -> Quality:
        """The plan's total CTR against the optimum's (no bound when no plan fits the rules)."""
        total = sum(self.ads[i].ctr for i in answer.selected_ids)
        return Quality("total ctr", total, None if self.optimum is None else self.optimum.total_ctr)

    def reference_answer(self) -> dict | None:
        return None if self.optimum is None else {"selected_ids": list(self.optimum.ids)}

    @check("catalog_check")
    def ids_exist(self, plan: AdPlan) -> CheckResult:
        unknown = [i for i in plan.selected_ids if i not in self.ads]
        if len(unknown) == 1:
            return False, f"id {unknown[0]} is not in the catalog"
        if unknown:
            return False, f"ids {enumerated(unknown)} are not in the catalog"
        return True, f"all {len(plan.selected_ids)} ids are in the catalog"

    @check("picks_check")
    def exact_number_of_ads(self, plan: AdPlan) -> CheckResult:
        required = self.params.picks
        if required is None:
            return Abstained("the request sets no number of ads")
        selected = f"selects {len(plan.selected_ids)} {'ad' if len(plan.selected_ids) == 1 else 'ads'}"
        if len(plan.selected_ids) != required:
            return False, f"{selected}; exactly {required} {'is' if required == 1 else 'are'} required"
        return True, f"{selected}, as required"

    @check("budget_check")
    def within_budget(self, plan: AdPlan) -> CheckResult:
        total = sum(self.ads[i].cost for i in plan.selected_ids)
        budget = Decimal(str(self.params.budget))  # as written: 4000 − 3999.9 is 0.1, not 0.0999999999999
        if total > budget:
            return False, f"total cost {number(total)} is {number(total - budget)} over the budget {number(budget)}"
        return True, f"total cost {number(total)} is within the budget {number(budget)}"

    @check("category_check")
    def one_ad_per_category(self, plan: AdPlan) -> CheckResult:
        if not self.params.one_per_category:
            return Abstained("the request turned the category rule off")
        first_of: dict[str, int] = {}
        for ad_id in plan.selected_ids:
            category = self.ads[ad_id].category
            if category in first_of:
                return False, f"ads {first_of[category]} and {ad_id} are both in category '{category}'"
            first_of[category] = ad_id
        return True, f"{len(first_of)} distinct categories"

    @check("ctr_total", substantive=False)
    def report_ctr(self, plan: AdPlan) -> CheckResult:
        """Always passes: records the true total CTR so people and the Scheduler can compare plans."""
        return True, f"total ctr={sum(self.ads[i].ctr for i in plan.selected_ids):.4f}"


def number(value: int | Decimal) -> str:
    """A cost or budget as people read it: 5,340, 4,999.5."""
    return f"{Decimal(value).normalize():,f}"


def enumerated(ids: list[int]) -> str:
    """117 and 120; 117, 118 and 120."""
    return ", ".join(map(str, ids[:-1])) + f" and {ids[-1]}"
