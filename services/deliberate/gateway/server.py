"""HTTP edge of the gateway (Starlette): OpenAI's routes, authentication, errors in OpenAI's format, and a
client disconnect cancelling the Scheduler call. The mapping is in requests.py, responses.py and stream.py."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.scheduler.v1 import scheduler_service_pb2_grpc

from ..core.admission import retry_after_ms
from ..core.server import MAX_MESSAGE_BYTES
from ..core.tls import aio_channel, channel_credentials
from .errors import ApiError, from_grpc, invalid
from .requests import ChatRequest, parse_chat_request
from .responses import completion
from .settings import GatewaySettings
from .stream import StreamTranslator

log = logging.getLogger("deliberate.gateway")

# Not an HTTP status of its own: nginx's "client closed request", for the log line of a cancelled solve.
CLIENT_CLOSED = 499


class Gateway:
    def __init__(self, settings: GatewaySettings, channel: grpc.aio.Channel):
        self.settings = settings
        self.scheduler = scheduler_service_pb2_grpc.SchedulerServiceStub(channel)
        self.health_stub = health_pb2_grpc.HealthStub(channel)
        self.api_keys = [key.strip() for key in settings.api_keys.split(",") if key.strip()]
        self.started = int(time.time())

    def authorize(self, request: Request) -> None:
        if not self.api_keys:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not any(hmac.compare_digest(token, key) for key in self.api_keys):
            raise ApiError(401, "missing or invalid API key (Authorization: Bearer …)", "authentication_error",
                           code="invalid_api_key")  # fmt: skip

    async def chat_completions(self, request: Request) -> Response:
        self.authorize(request)
        try:
            body = json.loads(await request.body())
        except ValueError as error:
            raise invalid("body", f"is not valid JSON: {error}") from None
        chat = parse_chat_request(body, self.settings.model_name)
        created = int(time.time())
        timeout_s = self.settings.request_timeout_s
        solve = SolveCall(self.scheduler, chat, request, timeout_s, forwarded_credentials(request))
        if chat.stream:
            return await self.stream(solve, chat, created)
        try:
            response = None
            async for event in solve.events():
                response = event.final if event.HasField("final") else response
        except ClientGone:
            return Response(status_code=CLIENT_CLOSED)
        finally:
            solve.close()
        return JSONResponse(completion(response, chat, created))

    async def stream(self, solve: SolveCall, chat: ChatRequest, created: int) -> Response:
        """Server-sent events. The first event is awaited before the response starts, so a request the Scheduler
        refuses (it validates before any stage runs) is an HTTP error like the non-streaming one."""
        events = solve.events()
        try:
            first = await anext(events)
        except ClientGone:
            solve.close()
            return Response(status_code=CLIENT_CLOSED)
        except BaseException:
            solve.close()
            raise
        translator = StreamTranslator(chat, created)

        async def body() -> AsyncIterator[str]:
            try:
                for item in translator.start() + translator.on_event(first):
                    yield sse(item)
                async for event in events:
                    for item in translator.on_event(event):
                        yield sse(item)
                yield "data: [DONE]\n\n"
            except ApiError as error:  # after the response started: an error event, as OpenAI sends it
                yield sse(error.body())
            except ClientGone:
                pass
            finally:
                solve.close()

        return StreamingResponse(
            body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )

    async def models(self, request: Request) -> Response:
        self.authorize(request)
        model = {"id": self.settings.model_name, "object": "model", "created": self.started, "owned_by": "deliberate"}
        return JSONResponse({"object": "list", "data": [model]})

    async def health(self, request: Request) -> Response:
        """200 while the Scheduler's gRPC health says SERVING, 503 otherwise (with what it said)."""
        try:
            reply = await self.health_stub.Check(
                health_pb2.HealthCheckRequest(), timeout=self.settings.health_timeout_s
            )
            scheduler = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        except grpc.aio.AioRpcError as error:
            scheduler = f"{error.code().name}: {error.details()}"
        serving = scheduler == "SERVING"
        body = {"status": "ok" if serving else "unavailable", "scheduler": scheduler}
        return JSONResponse(body, status_code=200 if serving else 503)


def forwarded_credentials(request: Request) -> tuple[tuple[str, str], ...]:
    """The caller's `Authorization` header, passed on to the Scheduler: a Scheduler with --auth-tokens-file
    checks it (its UNAUTHENTICATED and PERMISSION_DENIED become 401 and 403)."""
    authorization = request.headers.get("authorization")
    return (("authorization", authorization),) if authorization else ()


def sse(item: dict | str) -> str:
    """One server-sent event: a JSON data line, or a comment line (`: round_started`) that parsers skip."""
    if isinstance(item, str):
        return f": {item}\n\n"
    return f"data: {json.dumps(item, separators=(',', ':'))}\n\n"


class ClientGone(Exception):
    """The HTTP client disconnected while its solve ran; the solve was cancelled."""


class SolveCall:
    """One `SolveStream` call for one chat completion, streamed or not: cancelling a stream is what reaches the
    Drafter and the Refiner (their engines abort within about a second), and the HTTP client's disconnect
    cancels it. Once the body is read, the server's `receive` returns only on a disconnect (or after the
    response is sent), so a task waiting on it is the watch."""

    def __init__(self, stub, chat: ChatRequest, request: Request, timeout_s: float, metadata: tuple = ()):
        self.chat = chat
        self.call = stub.SolveStream(pb.SolveStreamRequest(request=chat.solve), timeout=timeout_s, metadata=metadata)
        self.disconnected = asyncio.Event()
        self.watch = asyncio.ensure_future(self.cancel_on_disconnect(request))

    async def cancel_on_disconnect(self, request: Request) -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        self.disconnected.set()
        if not self.call.done():
            log.info("client disconnected; cancelling the solve", extra={"request_id": self.chat.solve.request_id})
            self.call.cancel()

    async def events(self) -> AsyncIterator[pb.SolveStreamResponse]:
        """The Scheduler's events, the last one `final`; its errors as ApiError, a disconnect as ClientGone."""
        try:
            while (event := await self.call.read()) is not grpc.aio.EOF:
                yield event
                if event.HasField("final"):
                    return
        except grpc.aio.AioRpcError as error:
            hint = retry_after_ms(error.trailing_metadata())
            raise from_grpc(error.code(), error.details(), self.chat.rename, hint) from None
        except asyncio.CancelledError:
            if self.disconnected.is_set():
                raise ClientGone() from None
            raise
        raise ApiError(502, "the Scheduler's stream ended without a final result", "server_error")

    def close(self) -> None:
        self.call.cancel()  # a no-op once the call is done
        self.watch.cancel()


def create_app(settings: GatewaySettings) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Gateway]]:
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        credentials = channel_credentials(
            settings.downstream_tls_ca_file, settings.downstream_tls_cert_file, settings.downstream_tls_key_file
        )
        async with aio_channel(settings.scheduler_address, credentials, options) as channel:
            log.info("gateway ready", extra={"scheduler": settings.scheduler_address, "port": settings.port})
            yield {"gateway": Gateway(settings, channel)}

    async def api_error(request: Request, error: ApiError) -> Response:
        if error.status >= 500:
            log.warning("request failed", extra={"status": error.status, "error": error.message})
        return JSONResponse(error.body(), status_code=error.status, headers=error.headers())

    async def http_error(request: Request, error: HTTPException) -> Response:
        return await api_error(request, ApiError(error.status_code, f"{request.method} {request.url.path}: "
                                                 f"{error.detail}", type="invalid_request_error"))  # fmt: skip

    async def unexpected(request: Request, error: Exception) -> Response:
        log.exception("internal error")
        return await api_error(request, ApiError(500, f"internal error: {type(error).__name__}", "server_error"))

    def route(path: str, method: str, handler: Callable[[Gateway, Request], Awaitable[Response]]) -> Route:
        async def endpoint(request: Request) -> Response:
            return await handler(request.state.gateway, request)

        return Route(path, endpoint, methods=[method])

    return Starlette(
        routes=[
            route("/v1/chat/completions", "POST", Gateway.chat_completions),
            route("/v1/models", "GET", Gateway.models),
            route("/health", "GET", Gateway.health),
        ],
        lifespan=lifespan,
        exception_handlers={ApiError: api_error, HTTPException: http_error, Exception: unexpected},
    )
