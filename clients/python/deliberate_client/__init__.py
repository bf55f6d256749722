"""Python client of deliberate: `DeliberateClient` for code, `deliberate` for the command line."""

from .client import DeliberateClient

__all__ = ["DeliberateClient"]
