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
from deliberate.engines.remote_engine import RemoteEngine, RemoteSettings, chat_messages

CHUNK = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
LAST = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9}}


class ScriptedServer(ThreadingHTTPServer):
    """Answers the n-th POST with script[n]: an HTTP status, (status, error message), "stream" (one token, then
    stop), "cut" (one token, then the connection closes) or a list of chunks to stream. Keeps the request bodies."""

    def __init__(self, script: list):
        super().__init__(("127.0.0.1", 0), ScriptedHandler)
        self.script = script
        self.requests = 0
        self.bodies: list[dict] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class ScriptedHandler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        self.server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        step = self.server.script[min(self.server.requests, len(self.server.script) - 1)]
        self.server.requests += 1
        if isinstance(step, int | tuple):
            status, message = step if isinstance(step, tuple) else (step, f"scripted {step}")
            body = json.dumps({"error": {"message": message}}).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if isinstance(step, list):
            for chunk in [*step, LAST]:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True
            return
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


def _generate(server: ScriptedServer, retries: int = 3, top_logprobs: int = 0, engine: RemoteEngine | None = None):
    engine = engine or RemoteEngine(
        RemoteSettings(remote_url=server.url, remote_retries=retries, remote_backoff_s=0.01), "scripted"
    )
    params = SamplingParams(max_new_tokens=4, top_logprobs=top_logprobs)
    return engine.generate(["hi"], params, lambda e: None, Cancellation())


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
    engine = RemoteEngine(RemoteSettings(remote_url="http://127.0.0.1:1/v1"), "any")
    prompt = engine.format_chat('say "}"', "user\ntext") + "1, 2,"
    messages, prefill = chat_messages(prompt)
    assert messages == [{"role": "system", "content": 'say "}"'}, {"role": "user", "content": "user\ntext"}]
    assert prefill == "1, 2,"
    assert chat_messages("a raw prompt") == ([{"role": "user", "content": "a raw prompt"}], "")


def _token(text: str, logprob: float, *top: float) -> dict:
    candidates = [{"token": f"t{i}", "logprob": value, "bytes": []} for i, value in enumerate(top)]
    return {"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": candidates}


def _chunk(content: str | None, *tokens: dict) -> dict:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": None}
    if tokens:
        choice["logprobs"] = {"content": list(tokens)}
    return {"choices": [choice]}


def test_a_server_that_reports_log_probabilities_gives_a_trace_on_the_text(scripted):
    server = scripted(
        [
            _chunk(None),  # the role chunk: no text, no token
            _chunk("Hel", _token("Hel", -0.5, -0.5, -1.5)),
            _chunk("lo wor", _token("lo", -0.25, -0.25, -2.0), _token(" wor", -1.0, -0.75, -1.0)),  # two tokens
            _chunk("", _token("\ufffd", -2.0, -0.5, -2.0)),  # half a character: its text comes with the next
            _chunk("ld!", _token("ld!", -0.125, -0.125, -3.0)),
        ]
    )
    [completion] = _generate(server, top_logprobs=30)

    assert server.bodies[0]["logprobs"] is True and server.bodies[0]["top_logprobs"] == 20  # OpenAI's maximum
    assert completion.text == "Hello world!"
    trace = completion.trace
    assert trace.logprobs == (-0.5, -0.25, -1.0, -2.0, -0.125)
    assert trace.confidences == (1.0, 1.125, 0.875, 1.25, 1.5625)  # minus the mean of each token's candidates
    assert trace.ends == (3, 5, 9, 9, 12)


def test_no_log_probabilities_asked_or_sent_give_no_trace(scripted):
    server = scripted("stream")
    [completion] = _generate(server)
    assert "logprobs" not in server.bodies[0] and "top_logprobs" not in server.bodies[0]
    assert completion.trace is None

    server = scripted("stream")  # asked, but the server sends none
    [completion] = _generate(server, top_logprobs=5)
    assert server.bodies[0]["top_logprobs"] == 5
    assert (completion.text, completion.finish_reason, completion.trace) == ("Hi", "stop", None)

    server = scripted([_chunk("Hi", {"token": "Hi", "logprob": None}), _chunk("!", "not a token")])
    [completion] = _generate(server, top_logprobs=5)  # what it sends is no number: no trace, no failure
    assert (completion.text, completion.trace) == ("Hi!", None)


def test_a_server_that_refuses_log_probabilities_is_asked_without_them_from_then_on(scripted):
    server = scripted((400, "logprobs are not supported with this model"), "stream")
    engine = RemoteEngine(RemoteSettings(remote_url=server.url, remote_backoff_s=0.01), "scripted")
    [completion] = _generate(server, top_logprobs=5, engine=engine)
    assert (completion.text, completion.trace) == ("Hi", None)
    assert "logprobs" in server.bodies[0] and "logprobs" not in server.bodies[1]

    _generate(server, top_logprobs=5, engine=engine)
    assert server.requests == 3 and "logprobs" not in server.bodies[2]

    other = scripted((400, "context too long"))  # another 400 is the request's own failure
    with pytest.raises(EngineError, match="context too long"):
        _generate(other, top_logprobs=5)
    assert other.requests == 1
