"""A real HTTP webhook receiver on a free loopback port (http.server in a thread), scripted per attempt: what
status to answer, after how long, with which headers. Like a careful real receiver it keeps each delivery once
per `Idempotency-Key`, and it records every request it got."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    status: int = 200
    delay_s: float = 0.0  # before answering (after the delivery was kept: a slow receiver, not a lost one)
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()

    @property
    def json(self) -> dict:
        return json.loads(self.body)


class Receiver:
    def __init__(self, replies: list[Reply]):
        self.replies = list(replies)  # the attempt n gets replies[n], the last one thereafter
        self.requests: list[Received] = []
        self.kept: dict[str, dict] = {}  # Idempotency-Key → the delivery, kept once
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/hooks/promotion"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    attempt = len(receiver.requests)
                    receiver.requests.append(Received(dict(self.headers), body, time.monotonic()))
                    reply = receiver.replies[min(attempt, len(receiver.replies) - 1)]
                    key = self.headers.get("Idempotency-Key", "")
                    if reply.status < 300 or reply.delay_s:
                        receiver.kept.setdefault(key, json.loads(body))
                time.sleep(reply.delay_s)
                data = reply.body.encode()
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up waiting and closed the connection
                    pass

            def log_message(self, *args) -> None:  # quiet test output
                pass

        return Handler


@contextlib.contextmanager
def receiving(replies: list[Reply] | None = None) -> Iterator[Receiver]:
    receiver = Receiver(replies or [Reply()])
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
