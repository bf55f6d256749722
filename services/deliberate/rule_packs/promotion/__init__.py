"""The promotion rule pack (entry point `promotion`): a plan's discounts and quantities checked against the
request's product table — stock, gross margin, per-category discount caps — and its customer message against
the request's compliance terms."""

from .pack import Product, PromotionItem, PromotionPack, PromotionParams, PromotionPlan

__all__ = ["Product", "PromotionItem", "PromotionPack", "PromotionParams", "PromotionPlan"]
