"""The risk-model service (`python -m deliberate.risk`): scores credit offers with a deterministic model
(`model.py`); the Verifier's `credit` rule pack calls it through `client.py`."""
