"""The best plan of an ad-selection request, solved exactly: the bound a draft's total CTR is measured against, and
the plan offered as a reference when no draft is feasible.

The 0-1 integer program of `decisions.solver.best_rows`: maximize Σ ctr·x subject to Σ cost·x ≤ budget, Σ x = picks
(when the request fixes it) and, with the category rule on, at most one ad per category.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from deliberate.decisions.solver import NoSelection, SelectionError, best_rows

from .catalog import Ad

log = logging.getLogger("deliberate.rule_packs.ad_selection")


@dataclass(frozen=True)
class Optimum:
    """The best plan: its ids, sorted, and its total CTR, summed from the catalog's own figures."""

    ids: tuple[int, ...]
    total_ctr: float


def best_plan(ads: Iterable[Ad], budget: float, picks: int | None, one_per_category: bool) -> Optimum | None:
    """The plan of highest total CTR within the rules; None when no plan satisfies them (or, which HiGHS does not
    do on problems this size, when it stopped without proving one optimal)."""
    ads = list(ads)
    rows = [{"ctr": ad.ctr, "cost": ad.cost, "category": ad.category} for ad in ads]
    try:
        chosen = best_rows(rows, "ctr", picks, {"cost": budget}, "category" if one_per_category else None)
    except NoSelection:
        return None
    except SelectionError as error:
        log.warning("ad optimum not computed", extra={"solver_message": str(error)})
        return None
    plan = [ads[i] for i in chosen]
    return Optimum(tuple(sorted(ad.id for ad in plan)), sum(ad.ctr for ad in plan))
