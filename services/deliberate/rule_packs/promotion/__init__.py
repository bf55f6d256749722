"""The promotion rule pack (entry point `promotion`, `pack.PromotionPack`): a plan's discounts and quantities checked
against the request's product table — stock, gross margin, per-category discount caps — and its customer message
against the request's compliance terms; `prompt` tells decision programs how to compute a plan. The package imports
neither, so the Drafter reads the prompt alone."""
