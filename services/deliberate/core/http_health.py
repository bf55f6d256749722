"""A plain HTTP `GET /health` beside gRPC health, for watchdogs and probes that speak HTTP only.

200 with a JSON body while the service can serve, 503 otherwise; served from a daemon thread so a
busy event loop never makes the endpoint lie in either direction for long.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HttpHealthEndpoint:
    def __init__(self, host: str, port: int, describe: Callable[[], dict]):
        """`describe()` returns the JSON body; its "serving" key decides between 200 and 503."""
        self.describe = describe
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                if self.path.split("?")[0] != "/health":
                    self.send_error(404)
                    return
                body = endpoint.describe()
                payload = json.dumps(body).encode()
                self.send_response(200 if body.get("serving") else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:  # probes would flood the logs
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="http-health", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
