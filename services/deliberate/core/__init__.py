"""Plumbing shared by every service: configuration, logging, tracing, health, the server loop."""
