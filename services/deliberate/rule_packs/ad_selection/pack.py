"""The ad-selection pack: true totals from the catalog, never from sums written in the draft.

Which ids may be picked at all (the pool) is the request's own CEL constraint, not the pack's business.
The catalog is, first found: the request's own (`catalog` in params or context), the reference store's
current version (when the Verifier has `--reference-url`: the service `reference` the pack uses), the catalog
shipped as package data (`catalog.py`).
"""

from __future__ import annotations

import copy
from functools import cached_property

from pydantic import BaseModel, ConfigDict, StrictInt, field_validator

from deliberate.verifier.packs import CheckResult, ReferenceStore, RulePack, check

from .catalog import BUDGET, Ad, shipped_catalog
from .catalog_store import current_catalog


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
    budget: float = BUDGET
    catalog: list[Ad] | None = None  # None: the reference store's catalog, else the one shipped with the project


class AdSelectionPack(RulePack):
    name = "ad_selection"
    answer_model = AdPlan
    params_model = AdSelectionParams
    uses = ("reference",)

    @property
    def reference(self) -> ReferenceStore | None:
        return self.context["reference"]

    @property
    def waits_on_network(self) -> bool:
        return self.reference is not None and self.params.catalog is None

    def snapshot(self) -> AdSelectionPack:
        if not self.waits_on_network:
            return self
        pinned = copy.copy(self)
        pinned.ads = current_catalog(self.reference)
        return pinned

    @cached_property
    def ads(self) -> dict[int, Ad]:
        return {ad.id: ad for ad in (self.params.catalog or shipped_catalog())}

    @check("catalog_check")
    def ids_exist(self, plan: AdPlan) -> CheckResult:
        unknown = [i for i in plan.selected_ids if i not in self.ads]
        if unknown:
            return False, f"ids not in the catalog: {unknown}"
        return True, f"all {len(plan.selected_ids)} ids are in the catalog"

    @check("budget_check")
    def within_budget(self, plan: AdPlan) -> CheckResult:
        total = sum(self.ads[i].cost for i in plan.selected_ids)
        budget = self.params.budget
        if total > budget:
            return False, f"sum={total} > {budget:g}"
        return True, f"sum={total} <= {budget:g}"

    @check("category_check")
    def one_ad_per_category(self, plan: AdPlan) -> CheckResult:
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
