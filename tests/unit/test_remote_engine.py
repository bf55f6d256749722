"""The remote engine's retries against answers a real model server gives only under overload or failure (503,
429, a stream cut after its first token), scripted by a small HTTP server in this process. Everything a real
server can show is tested against one in tests/integration/test_remote_engine.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from deliberate.engines import SamplingParams
from deliberate.engines.base import Cancellation, EngineError
from deliberate.engines.remote_engine import RemoteConfig, RemoteEngine, chat_messages

CHUNK = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
LAST = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9}}


class ScriptedServer(ThreadingHTTPServer):
    """Answers the n-th POST with script[n]: an HTTP status, "stream" (one token, then stop) or "cut" (one
    token, then the connection closes)."""

    def __init__(self, script: list):
        super().__init__(("127.0.0.1", 0), ScriptedHandler)
        self.script = script
        self.requests = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class ScriptedHandler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        self.rfile.read(int(self.headers["Content-Length"]))
        step = self.server.script[min(self.server.requests, len(self.server.script) - 1)]
        self.server.requests += 1
        if isinstance(step, int):
            body = json.dumps({"error": {"message": f"scripted {step}"}}).encode()
            self.send_response(step)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps(CHUNK)}\n\n".encode())
        if step == "stream":
            self.wfile.write(f"data: {json.dumps(LAST)}\n\ndata: [DONE]\n\n".encode())
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator:
    servers = []

    def start(*script) -> ScriptedServer:
        server = ScriptedServer(list(script))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _generate(server: ScriptedServer, retries: int = 3):
    engine = RemoteEngine(RemoteConfig(url=server.url, retries=retries, backoff_s=0.01), "scripted")
    return engine.generate(["hi"], SamplingParams(max_new_tokens=4), lambda e: None, Cancellation())


def test_5xx_and_429_before_the_first_token_are_retried(scripted):
    server = scripted(503, 429, 502, "stream")
    [completion] = _generate(server)
    assert server.requests == 4
    assert (completion.text, completion.finish_reason, completion.prompt_tokens) == ("Hi", "stop", 9)
    assert completion.completion_tokens == 1  # no completion_tokens in the usage: the content chunks counted


def test_retries_are_bounded_and_the_last_answer_maps_to_its_status(scripted):
    server = scripted(429)
    with pytest.raises(EngineError, match=r"\(429\): scripted 429") as caught:
        _generate(server, retries=2)
    assert server.requests == 3 and caught.value.status == "RESOURCE_EXHAUSTED"

    server = scripted(503)
    with pytest.raises(EngineError) as caught:
        _generate(server, retries=0)
    assert server.requests == 1 and caught.value.status == "UNAVAILABLE"


def test_a_stream_cut_after_its_first_token_is_not_retried(scripted):
    server = scripted("cut", "stream")
    with pytest.raises(EngineError, match=r"cut the stream short \(no finish reason\)") as caught:
        _generate(server)
    assert server.requests == 1 and caught.value.status == "UNAVAILABLE"


def test_chat_messages_round_trip_format_chat_and_keep_appended_text():
    engine = RemoteEngine(RemoteConfig(url="http://127.0.0.1:1/v1"), "any")
    prompt = engine.format_chat('say "}"', "user\ntext") + "1, 2,"
    messages, prefill = chat_messages(prompt)
    assert messages == [{"role": "system", "content": 'say "}"'}, {"role": "user", "content": "user\ntext"}]
    assert prefill == "1, 2,"
    assert chat_messages("a raw prompt") == ([{"role": "user", "content": "a raw prompt"}], "")
