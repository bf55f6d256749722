"""`python -m deliberate.verifier`: the Verifier service, with gRPC health and HTTP GET /health.

With `--workers 1` (the default) this process serves; with more, it starts that many worker processes serving one
port and watches them (workers.py).
"""

from __future__ import annotations

import sys

from ..core.config import parse_settings
from ..core.http_health import HttpHealthEndpoint
from .service import health_state, serve
from .settings import VerifierSettings


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    settings = parse_settings(VerifierSettings, argv, prog="deliberate.verifier")
    if settings.worker_count > 1:
        from .workers import run_workers

        sys.exit(run_workers(argv, settings))
    state = health_state(settings)
    http_health = HttpHealthEndpoint(settings.host, settings.http_port, lambda: {"service": "verifier", **state})
    http_health.start()
    try:
        serve(settings, state)
    finally:
        http_health.stop()


if __name__ == "__main__":
    main()
