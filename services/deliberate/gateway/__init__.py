"""The OpenAI-compatible HTTP gateway in front of the Scheduler (docs/gateway.md)."""
