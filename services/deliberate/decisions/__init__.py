"""Decisions: the one home of what a structured request's plan is checked against and how it is computed — the
rule-pack interface and registry (`packs`), a pack's reference data (`reference`), what a decision program reads as
`ctx` (`packs.decision_data`), what it is told about a pack's own functions (`prompts`), and the exact selection
engine it may call (`solver`). Every service may read it; it reads no service. Nothing is imported here: the
Drafter reads `prompts` without `packs`' dependencies (Redis, the packs)."""
