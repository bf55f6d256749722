"""Rule packs shipped with deliberate as plugins: the Verifier loads each through the `deliberate.rule_packs`
entry point declared in pyproject.toml, exactly as it loads a user's pack, and imports none of them."""
