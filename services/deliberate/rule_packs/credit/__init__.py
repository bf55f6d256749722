"""The credit-offer rule pack (entry point `credit`): each offer scored by the risk-model service
(`deliberate.risk`), the regulator's disclosure sentence required in the answer."""

from .pack import CreditOffer, CreditOffers, CreditPack, CreditParams

__all__ = ["CreditOffer", "CreditOffers", "CreditPack", "CreditParams"]
