"""Timing benchmarks: one engine, service or path measured against another on the same work."""
