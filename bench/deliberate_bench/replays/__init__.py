"""Replays on recorded drafts: stopping rules and draft counts decided again on paper, no model."""
