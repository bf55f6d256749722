"""Engine on a remote OpenAI-compatible server (vLLM, SGLang, llama.cpp's llama-server, Ollama) over HTTP.

Chat messages, not rendered prompts: only the server knows its model's chat template, so `format_chat` returns
the messages serialized (`CHAT_MARKER` + JSON) and `generate` sends them to `{url}/chat/completions`. Text a
caller appends to that string (the Refiner's consensus prefix) is sent as a final assistant message for the
model to continue: llama.cpp's server continues it by itself, vLLM and SGLang when asked with
`continue_final_message` (sent only then: OpenAI itself refuses unknown fields). A prompt that did not come from
`format_chat` is sent as one user message.

N sequences are N streaming requests side by side, not one request with `n`: the Drafter's N prompts always
differ (one strategy hint each), and a request per sequence gives each its own seed (seed + i) and lets one be
cancelled alone. A cancelled sequence's connection is shut at once (within CANCEL_POLL_S), even while the server
still queues it or evaluates its prompt, and the server drops a request whose client went away.

Token confidence: with `top_logprobs` > 0 a request asks for the log-probabilities of the sampled tokens and of
the top-k candidates (`logprobs`, `top_logprobs`: OpenAI's chat fields) and the streamed chunks' `logprobs.content`
become the Completion's trace. Which distribution they come from is the server's: llama.cpp's and vLLM's (by
default) are the model's own, before temperature and penalties; OpenAI does not say. A server that sends none
gives no trace; one that refuses the fields (400 naming them) is asked again without them, and no more after that.

Retries: a connect error, a dropped connection, 408, 429 or 5xx before the first token is retried with
exponential backoff; nothing is retried once a token arrived. Failures raise `EngineError` with the gRPC status
the services answer with (`STATUS_OF_HTTP`, docs/models.md#remote-engine). The API key is sent as a bearer
token and never logged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pydantic import BaseModel, Field, SecretStr

from .base import (
    Batch,
    Completion,
    Engine,
    EngineCapabilities,
    EngineError,
    EventSink,
    FinishReason,
    SamplingParams,
    TextDelta,
    TraceBuilder,
    error_message,
    sequence_cancelled,
)

log = logging.getLogger("deliberate.engine")

# Starts a prompt that format_chat serialized; a control character no chat text begins with.
CHAT_MARKER = "\x1fdeliberate-chat\x1f"
# How often a generation looks for sequences to stop while their threads wait for the server.
CANCEL_POLL_S = 0.05
# Most candidates per token OpenAI's chat API takes (`top_logprobs`); vLLM's default --max-logprobs is the same.
MAX_TOP_LOGPROBS = 20
# HTTP answers that may succeed when asked again a little later.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# The gRPC status a final HTTP error maps to; others are INTERNAL.
STATUS_OF_HTTP = {
    400: "INVALID_ARGUMENT",  # e.g. the prompt and budget exceed the server's context
    401: "FAILED_PRECONDITION",  # the deployment's API key is wrong: not the gRPC caller's credentials
    403: "FAILED_PRECONDITION",
    404: "FAILED_PRECONDITION",  # no such model (or no OpenAI API under that URL)
    413: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
}


class RemoteSettings(BaseModel):
    """Where the server is and how patiently to talk to it: the remote engine's settings, composed into every
    engine-backed service's (`--remote-url`, `DELIBERATE_REMOTE_URL`, …; docs/configuration.md)."""

    remote_url: str = Field(
        "",
        description="engine=remote: the server's OpenAI base URL, with its /v1 (vLLM, SGLang, llama.cpp's "
        "llama-server, Ollama: http://host:port/v1).",
    )
    remote_model: str = Field(
        "", description="engine=remote: the model name sent to the server; empty = the first one it lists."
    )
    remote_api_key: SecretStr = Field(
        SecretStr(""), description="engine=remote: API key sent as a bearer token (never logged); empty = none."
    )
    remote_max_parallel: int = Field(
        8, ge=1, description="engine=remote: requests in flight at once (the capacity the Drafter reports)."
    )
    remote_connect_timeout_s: float = Field(5.0, gt=0, description="engine=remote: connect timeout per try.")
    remote_read_timeout_s: float = Field(
        120.0,
        gt=0,
        description="engine=remote: longest silence of the server, before the first token (queue, prompt) or "
        "between two; then DEADLINE_EXCEEDED.",
    )
    remote_retries: int = Field(
        3,
        ge=0,
        description="engine=remote: retries of a connect error, 429 or 5xx before the first token (never after), "
        "with exponential backoff.",
    )
    remote_backoff_s: float = Field(0.5, ge=0, description="engine=remote: wait before the first retry; doubles.")


class RemoteEngine(Engine):
    name = "remote"
    capabilities = EngineCapabilities(seed_per_sequence=True, cancel_one_sequence=True, output_schema=True)

    settings_class = RemoteSettings

    def __init__(self, settings: RemoteSettings, model: str) -> None:
        import httpx2

        logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per request otherwise; the engine logs its own
        self.settings = settings
        self.model = model
        self.url = settings.remote_url.rstrip("/")
        self.logprobs_refused = False  # the server answered 400 to a request for log-probabilities
        api_key = settings.remote_api_key.get_secret_value()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx2.Client(
            headers=headers,
            timeout=httpx2.Timeout(settings.remote_read_timeout_s, connect=settings.remote_connect_timeout_s),
            # A connection per request (no keep-alive): its socket is known from the connect on, so a cancelled
            # sequence's connection can be shut even while the server has not answered yet.
            limits=httpx2.Limits(max_connections=settings.remote_max_parallel, max_keepalive_connections=0),
        )

    @classmethod
    def load(cls, settings: RemoteSettings) -> RemoteEngine:
        """Connects: asks the server for its models (so a wrong URL or key fails at startup) and picks the
        configured one, or the first listed."""
        engine = cls(settings, settings.remote_model)
        with contextlib.closing(engine._request("GET", "/models", lambda: False, threading.Event())) as response:
            try:
                listed = [m["id"] for m in json.loads(response.read())["data"]]
            except (ValueError, KeyError, TypeError):
                raise EngineError(f"{engine.url}/models answered no OpenAI model list", "FAILED_PRECONDITION") from None
        if not engine.model:
            if not listed:
                raise EngineError(
                    f"remote engine at {engine.url} lists no model; set DELIBERATE_REMOTE_MODEL", "FAILED_PRECONDITION"
                )
            engine.model = listed[0]
        elif engine.model not in listed:  # Ollama also takes "name" for "name:latest": let the server decide
            log.warning("remote model not listed", extra={"model": engine.model, "listed": listed[:10]})
        log.info("remote engine ready", extra={"url": engine.url, "model": engine.model})
        return engine

    @classmethod
    def from_settings(cls, model: str, threads: int, settings: RemoteSettings) -> RemoteEngine:
        if not settings.remote_url:
            raise ValueError("the remote engine needs the server's URL: --remote-url / DELIBERATE_REMOTE_URL")
        return cls.load(settings)

    @property
    def capacity(self) -> int:
        return self.settings.remote_max_parallel  # further sequences wait for a connection

    def format_chat(self, system: str, user: str) -> str:
        return CHAT_MARKER + json.dumps([{"role": "system", "content": system}, {"role": "user", "content": user}])

    def decode(self, batch: Batch) -> list[Completion]:
        cancel = batch.cancel
        streams = [_Stream(index, batch.started) for index in range(len(batch.prompts))]
        failed = threading.Event()  # one sequence failed: the others stop and the call raises its error

        def run(stream: _Stream) -> None:
            index = stream.index
            body = self._body(batch.prompts[index], batch.params, batch.seeds[index], batch.schema_of(index))
            try:
                self._stream(stream, body, batch.emit, cancel, failed)
            except BaseException:
                failed.set()
                raise

        done = threading.Event()
        watcher = threading.Thread(target=_shut_stopped, args=(streams, cancel, failed, done), daemon=True)
        watcher.start()
        try:
            workers = min(len(streams), self.settings.remote_max_parallel)
            with ThreadPoolExecutor(workers, thread_name_prefix="remote") as pool:
                for future in [pool.submit(run, stream) for stream in streams]:
                    future.result()  # raises the first failed sequence's error
        finally:
            done.set()
        batch.step_times += max(streams, key=lambda s: len(s.token_times)).token_times
        return [s.completion for s in streams]

    def _body(self, prompt: str, params: SamplingParams, seed: int | None, output_schema: dict | None) -> dict:
        messages, prefill = chat_messages(prompt)
        body = {
            "model": self.model,
            "messages": messages,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "presence_penalty": params.presence_penalty,
            "frequency_penalty": params.frequency_penalty,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if prefill:
            messages.append({"role": "assistant", "content": prefill})
            body |= {"continue_final_message": True, "add_generation_prompt": False}
        if seed is not None:
            body["seed"] = seed
        if params.min_new_tokens > 0:  # benchmarks only; vLLM's extension
            body["min_tokens"] = params.min_new_tokens
        if params.top_logprobs > 0 and not self.logprobs_refused:
            body |= {"logprobs": True, "top_logprobs": min(params.top_logprobs, MAX_TOP_LOGPROBS)}
        if output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": output_schema},
            }
        return body

    def _stream(
        self, stream: _Stream, body: dict, emit: EventSink, cancel: threading.Event, failed: threading.Event
    ) -> None:
        """One sequence: its request (retried until its first token), its deltas, then its Completion."""

        def stopped() -> bool:
            return failed.is_set() or sequence_cancelled(cancel, stream.index)

        def on_socket(sock: socket.socket) -> None:
            stream.connection = sock

        response = None if stopped() else self._open_stream(body, stopped, cancel, on_socket)
        if response is None:
            stream.cancelled = True
        else:
            try:
                self._read(stream, response, emit, stopped)
            finally:
                stream.connection = None
                response.close()  # mid-stream, this drops the connection: the server stops the sequence
        if failed.is_set():
            return  # no completion: the call raises the failed sequence's error
        stream.finish()
        emit(stream.completion)

    def _open_stream(self, body: dict, stopped, cancel: threading.Event, on_socket):
        """The chat completion's open response; asked again without log-probabilities when the server refuses
        them, which only cost the request its trace."""
        try:
            return self._request("POST", "/chat/completions", stopped, cancel, body, on_socket)
        except EngineError as error:
            if "logprobs" not in body or error.status != "INVALID_ARGUMENT" or "logprob" not in str(error).lower():
                raise
            self.logprobs_refused = True
            log.warning("remote engine refused log-probabilities; asking without", extra={"error": str(error)})
            body = {key: value for key, value in body.items() if key not in ("logprobs", "top_logprobs")}
            return self._request("POST", "/chat/completions", stopped, cancel, body, on_socket)

    def _read(self, stream: _Stream, response, emit: EventSink, stopped) -> None:
        """Emits the stream's deltas until it ends, or until `stopped()` (its connection may be shut meanwhile:
        `_shut_stopped`)."""
        import httpx2

        try:
            for event in httpx2.EventSource(response):
                if stopped():
                    break
                if event.data.strip() == "[DONE]":
                    return
                if piece := stream.read(event.data, self.url):
                    emit(TextDelta(stream.index, piece, stream.trace.new_confidences()))
        except httpx2.TimeoutException:
            raise EngineError(
                f"remote engine at {self.url} sent nothing for {self.settings.remote_read_timeout_s:g} s",
                "DEADLINE_EXCEEDED",
            ) from None
        except httpx2.TransportError as error:
            if not stopped():
                raise EngineError(f"remote engine at {self.url} broke off the stream: {error}", "UNAVAILABLE") from None
        if stream.finish_reason is not None:
            return  # finished, if perhaps stopped just before [DONE]
        if stopped():
            stream.cancelled = True
        else:  # closed without [DONE] or a finish reason
            raise EngineError(f"remote engine at {self.url} cut the stream short (no finish reason)", "UNAVAILABLE")

    def _request(self, method: str, path: str, stopped, wake: threading.Event, body=None, on_socket=None):
        """The open response to `method path`, retried with backoff; None once `stopped()` (checked after each
        failed try; `wake` cuts a backoff wait short). `on_socket` gets the connection's socket once connected."""
        import httpx2

        def trace(name: str, info: dict) -> None:  # httpcore's hook: the socket before any answer arrives
            if on_socket is not None and name.endswith("connect_tcp.complete"):
                on_socket(info["return_value"].get_extra_info("socket"))

        url = self.url + path
        for attempt in range(self.settings.remote_retries + 1):
            last_try = attempt == self.settings.remote_retries
            request = self._http.build_request(method, url, json=body, extensions={"trace": trace})
            try:
                response = self._http.send(request, stream=True)
            except (httpx2.ConnectTimeout, httpx2.NetworkError, httpx2.RemoteProtocolError) as error:
                if stopped():  # its connection was shut
                    return None
                if last_try:
                    raise EngineError(
                        f"remote engine unreachable at {url} after {attempt + 1} tries: {error}", "UNAVAILABLE"
                    ) from None
            except httpx2.TimeoutException:  # connected, but no answer in time (or no free connection)
                raise EngineError(
                    f"remote engine at {url} did not answer within {self.settings.remote_read_timeout_s:g} s",
                    "DEADLINE_EXCEEDED",
                ) from None
            else:
                if response.status_code < 400:
                    return response
                response.read()
                response.close()
                if last_try or response.status_code not in RETRYABLE_STATUSES:
                    raise http_error(url, self.model, response.status_code, response.text)
            wake.wait(self.settings.remote_backoff_s * 2**attempt)
            if stopped():
                return None
        raise AssertionError("unreachable")


def _shut_stopped(streams: list[_Stream], cancel: threading.Event, failed: threading.Event, done) -> None:
    """Until `done`: shuts the connection of each stopped sequence, so a thread blocked reading it (the server
    still queues the request or evaluates its prompt) returns at once rather than at the next token."""
    while not done.wait(CANCEL_POLL_S):
        for stream in streams:
            sock = stream.connection
            if sock is not None and (failed.is_set() or sequence_cancelled(cancel, stream.index)):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def chat_messages(prompt: str) -> tuple[list[dict], str]:
    """The messages format_chat serialized into `prompt`, and the text appended after them (to continue)."""
    if not prompt.startswith(CHAT_MARKER):
        return [{"role": "user", "content": prompt}], ""
    messages, end = json.JSONDecoder().raw_decode(prompt, len(CHAT_MARKER))
    return messages, prompt[end:]


def http_error(url: str, model: str, status: int, text: str) -> EngineError:
    """The EngineError for an HTTP error answer, with the server's own message."""
    try:
        error = json.loads(text).get("error", text)
        message = error_message(error)
    except (ValueError, AttributeError):
        message = text
    no_model = f"has no model {model!r} (or no OpenAI API)" if model else "has no OpenAI API"
    what = {401: "refused the API key", 403: "refused the request", 404: no_model}
    return EngineError(
        f"remote engine at {url} {what.get(status, 'failed')} ({status}): {message[:300]}",
        STATUS_OF_HTTP.get(status, "UNAVAILABLE" if status >= 500 else "INTERNAL"),
    )


@dataclass
class _Stream:
    """One sequence's streamed chat completion so far."""

    index: int
    started: float
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int | None = None  # from the server's usage; None: count the deltas
    finish_reason: str | None = None
    cancelled: bool = False
    connection: socket.socket | None = None  # the open stream's socket, for `_shut_stopped`
    token_times: list[float] = field(default_factory=list)
    trace: TraceBuilder = field(default_factory=TraceBuilder)
    completion: Completion | None = None

    def read(self, data: str, url: str) -> str:
        """Folds one chunk (an event's JSON data) in; returns its new text."""
        try:
            chunk = json.loads(data)
        except ValueError:
            raise EngineError(f"remote engine at {url} streamed no JSON: {data[:200]!r}", "INTERNAL") from None
        if "error" in chunk:  # llama.cpp reports a failure mid-stream as a chunk
            raise EngineError(f"remote engine at {url} failed mid-stream: {chunk['error']}", "INTERNAL")
        piece = ""
        tokens: list = []
        for choice in chunk.get("choices") or ():
            piece += (choice.get("delta") or {}).get("content") or ""
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            if isinstance(logprobs := choice.get("logprobs"), dict) and isinstance(logprobs.get("content"), list):
                tokens += logprobs["content"]
        start = len(self.text)
        if piece:
            self.text += piece
            self.token_times.append(time.perf_counter())
        if tokens:
            self.trace_tokens(tokens, start)
        if usage := chunk.get("usage"):
            self.prompt_tokens = usage.get("prompt_tokens") or self.prompt_tokens
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
        return piece

    def trace_tokens(self, tokens: list, start: int) -> None:
        """Adds a chunk's tokens (OpenAI's `logprobs.content`: {"token", "logprob", "top_logprobs": [{"logprob"}]})
        to the trace; its text began at `start`. Each token ends where its own text does, within the chunk's text;
        the chunk's last token at the chunk's end. Entries with no number are left out."""
        end = len(self.text)
        position = start
        for number, token in enumerate(tokens):
            if not isinstance(token, dict) or not _is_number(logprob := token.get("logprob")):
                continue
            text = token.get("token")
            position = min(end, position + len(text)) if isinstance(text, str) else position
            candidates = token.get("top_logprobs") or ()
            top = [c["logprob"] for c in candidates if isinstance(c, dict) and _is_number(c.get("logprob"))]
            self.trace.add(float(logprob), top, end if number == len(tokens) - 1 else position)

    def finish(self) -> None:
        reason: FinishReason = "aborted" if self.cancelled else "stop" if self.finish_reason == "stop" else "length"
        # A server that sends no usage (or a stream closed early) leaves the count of content chunks: one token
        # each on llama.cpp and vLLM.
        tokens = self.completion_tokens if self.completion_tokens is not None else len(self.token_times)
        self.completion = Completion(
            self.index,
            self.text,
            self.prompt_tokens,
            tokens,
            reason,
            time.perf_counter() - self.started,
            self.trace.trace(),
        )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
