"""Ad selection: pick 5 ads maximizing total predicted CTR, total cost ≤ 5000, every id in the pool,
no two ads of one category (the competitor-conflict rule).

The catalog of 100 ads is deterministic (`generate_catalog`) and shipped as `ad_catalog.json`; the
Verifier computes true totals from it and never trusts sums written in a draft.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

CATALOG_PATH = Path(__file__).with_name("ad_catalog.json")
CATEGORIES = ("travel", "finance", "retail", "auto", "food", "tech", "health", "fashion", "games", "education")
BUDGET = 5000
PICKS = 5


@dataclass(frozen=True)
class Ad:
    """One ad of a catalog. A plain dataclass: the client needs no pydantic (the Verifier's pack validates a
    catalog given in a request through pydantic, which checks these types and runs `__post_init__`)."""

    id: int
    cost: int
    ctr: float  # predicted click-through rate
    category: str

    def __post_init__(self) -> None:
        if self.id < 1:
            raise ValueError(f"id must be >= 1, got {self.id}")
        if self.cost <= 0:
            raise ValueError(f"cost must be > 0, got {self.cost}")
        if not 0 <= self.ctr <= 1:
            raise ValueError(f"ctr must be within [0, 1], got {self.ctr}")

    def to_dict(self) -> dict:
        return asdict(self)


def generate_catalog(seed: int = 2026, size: int = 100) -> list[Ad]:
    rng = random.Random(seed)
    return [
        Ad(
            id=i,
            cost=rng.randrange(400, 2001, 5),
            ctr=round(rng.uniform(0.005, 0.06), 4),
            category=rng.choice(CATEGORIES),
        )
        for i in range(1, size + 1)
    ]


@lru_cache(maxsize=1)
def load_catalog() -> tuple[Ad, ...]:
    return tuple(Ad(**row) for row in json.loads(CATALOG_PATH.read_text()))


def catalog_table(ads: tuple[Ad, ...] | list[Ad]) -> str:
    """The catalog as compact prompt lines, `id cost ctr‰ category` (CTR in per mille keeps lines short)."""
    return "\n".join(f"{ad.id} {ad.cost} {ad.ctr * 1000:.1f} {ad.category}" for ad in ads)


def prompt(ads: tuple[Ad, ...] | list[Ad] | None = None) -> str:
    ads = ads or load_catalog()
    return (
        f"Select exactly {PICKS} ads that maximize the total predicted CTR. Rules: the total cost must be at most "
        f"{BUDGET}; never pick two ads of the same category (competitors). "
        'Answer with JSON like {"selected_ids": [1, 2, 3, 4, 5]}.\n'
        f"Catalog, one ad per line (id, cost, predicted CTR in per mille, category):\n{catalog_table(ads)}"
    )


OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "selected_ids": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1},
            "minItems": PICKS,
            "maxItems": PICKS,
            "uniqueItems": True,
        }
    },
    "required": ["selected_ids"],
}

# The request's declared constraints, as plain dicts in the protobuf JSON mapping of deliberate.common.v1.Constraint.
CONSTRAINTS = [
    {
        "id": "size_check",
        "celExpression": f"size(plan.selected_ids) == {PICKS}",
        "failureMessage": f"exactly {PICKS} ads must be selected",
    },
    {
        "id": "pool_check",
        "celExpression": "plan.selected_ids.all(i, i in ctx.pool)",
        "failureMessage": "every selected id must be in ctx.pool",
    },
    {"rulePack": "ad_selection", "params": {"budget": BUDGET, "picks": PICKS}},
]


def context(ads: tuple[Ad, ...] | list[Ad] | None = None) -> dict:
    """The request's data: the catalog (which the pack checks against and a decision program reads as
    `ctx["catalog"]`), the pool of ids that may be picked, and the budget."""
    ads = ads or load_catalog()
    return {"catalog": [ad.to_dict() for ad in ads], "pool": [ad.id for ad in ads], "budget": BUDGET, "picks": PICKS}


if __name__ == "__main__":  # regenerates the shipped catalog
    rows = ",\n".join(json.dumps(ad.to_dict()) for ad in generate_catalog())
    CATALOG_PATH.write_text(f"[\n{rows}\n]\n")
