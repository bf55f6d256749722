"""The ad catalog the pack ships: the model of one ad and the 100 ads of `ad_catalog.json` (package data), which
the pack checks against when neither the request nor the reference store gives a catalog.

The file is a copy of the client's example catalog (clients/python/deliberate_client/examples/ad_catalog.json,
the ads its prompt lists), so a server needs no client package; a test keeps the two identical.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

CATALOG_FILE = "ad_catalog.json"
BUDGET = 5000  # the example's budget: the pack's default


class Ad(BaseModel):
    """One ad of a catalog."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    id: int = Field(ge=1)
    cost: int = Field(gt=0)
    ctr: float = Field(ge=0, le=1, description="predicted click-through rate")
    category: str


ADS = TypeAdapter(list[Ad])


@cache
def shipped_catalog() -> tuple[Ad, ...]:
    return tuple(ADS.validate_json(files(__package__).joinpath(CATALOG_FILE).read_bytes()))
