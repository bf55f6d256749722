"""The best plan of an ad-selection request, solved exactly: the bound a draft's total CTR is measured against, and
the plan offered as a reference when no draft is feasible.

A 0-1 integer program, solved with HiGHS (`scipy.optimize.milp`): maximize Σ ctr·x subject to Σ cost·x ≤ budget,
Σ x = picks (when the request fixes it) and, with the category rule on, Σ x ≤ 1 over each category's ads. HiGHS
stops at a relative gap of 1e-4 unless told otherwise; the gap is set to 0 here so the optimum is exact, not
nearly so. A few milliseconds for 100-120 ads (3-17 ms measured).

HiGHS 1.12 (scipy 1.17) may print `HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();` to
stdout during a solve: a leftover debug line (ERGO-Code/HiGHS#2783), not an error; the optimum is unaffected.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from .catalog import Ad

log = logging.getLogger("deliberate.rule_packs.ad_selection")

# HiGHS's absolute gap tolerance (1e-6) is in the objective's unit: in basis points of CTR (0.0536 → 536) it lies
# far below any difference between two plans' totals of CTRs as catalogs write them.
BASIS_POINTS = 10_000
# scipy's milp status codes (OptimizeResult.status)
OPTIMAL, INFEASIBLE = 0, 2


@dataclass(frozen=True)
class Optimum:
    """The best plan: its ids, sorted, and its total CTR, summed from the catalog's own figures."""

    ids: tuple[int, ...]
    total_ctr: float


def best_plan(ads: Iterable[Ad], budget: float, picks: int | None, one_per_category: bool) -> Optimum | None:
    """The plan of highest total CTR within the rules; None when no plan satisfies them (or, which HiGHS does not
    do on problems this size, when it stopped without proving one optimal)."""
    import numpy as np  # imported on first use: scipy costs ~0.2 s to import, and only a solve needs it
    from scipy.optimize import Bounds, LinearConstraint, milp

    ads = list(ads)
    count = len(ads)
    if count == 0:  # nothing to solve (milp wants a variable): only the empty plan, if the rules allow it
        return Optimum((), 0.0) if picks in (None, 0) and budget >= 0 else None
    rows = [np.array([ad.cost for ad in ads], dtype=float)]
    lower, upper = [-np.inf], [budget]
    if picks is not None:
        rows.append(np.ones(count))
        lower.append(picks)
        upper.append(picks)
    if one_per_category:
        for category in sorted({ad.category for ad in ads}):
            rows.append(np.array([float(ad.category == category) for ad in ads]))
            lower.append(-np.inf)
            upper.append(1)
    result = milp(
        c=-np.array([ad.ctr for ad in ads]) * BASIS_POINTS,  # milp minimizes
        constraints=LinearConstraint(np.vstack(rows), lower, upper),
        integrality=np.ones(count),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0},
    )
    if result.status == INFEASIBLE:
        return None
    if result.status != OPTIMAL:
        log.warning("ad optimum not computed", extra={"status": result.status, "solver_message": result.message})
        return None
    chosen = [ad for ad, x in zip(ads, result.x, strict=True) if x > 0.5]
    if sum(ad.cost for ad in chosen) > budget:  # within HiGHS's feasibility tolerance, yet over: not a plan
        log.warning("ad optimum over budget by the solver's tolerance", extra={"budget": budget})
        return None
    return Optimum(tuple(sorted(ad.id for ad in chosen)), sum(ad.ctr for ad in chosen))
