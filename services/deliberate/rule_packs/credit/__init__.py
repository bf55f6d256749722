"""The credit-offer rule pack (entry point `credit`, `pack.CreditPack`): each offer scored by the risk-model service
(`deliberate.risk`), the regulator's disclosure sentence required in the answer; `prompt` tells decision programs
about the risk model they may call. The package imports neither, so the Drafter reads the prompt alone."""
