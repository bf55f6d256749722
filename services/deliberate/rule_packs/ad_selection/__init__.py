"""The ad-selection rule pack (entry point `ad_selection`), with its catalog from the reference store or
from package data; `python -m deliberate.rule_packs.ad_selection load` puts a catalog into the store."""

from .pack import AdPlan, AdSelectionPack, AdSelectionParams

__all__ = ["AdPlan", "AdSelectionPack", "AdSelectionParams"]
