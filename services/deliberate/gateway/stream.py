"""The Scheduler's `SolveStream` events → OpenAI chat completion chunks, without HTTP or gRPC (server.py sends
them as server-sent events). The chunks carry what a completion does (responses.py), as it arrives.

Documented in docs/gateway.md#streaming.
"""

from __future__ import annotations

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from .requests import ChatRequest
from .responses import StopFilter, draft_choices, extension, final_content, status_name, usage


class StreamTranslator:
    """SolveStream events → chat.completion.chunk objects (dicts) and SSE comments (str, for stage events
    before the answer: they keep the connection alive and show progress without breaking OpenAI's parsers).

    The answer streams as choice 0's content; the thinking-trace marker, sent before it, goes to
    `delta.reasoning_content` unless the request asked for it in the content. The final event adds the draft
    choices, the `deliberate` field and, with stream_options.include_usage, a usage chunk."""

    def __init__(self, chat: ChatRequest, created: int):
        self.chat = chat
        self.created = created
        self.cut = StopFilter(chat.stop)
        self.streamed = ""

    def chunk(self, choices: list[dict], **extra: object) -> dict:
        base = {"id": self.chat.completion_id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.chat.model, "choices": choices}  # fmt: skip
        return base | extra

    def start(self) -> list[dict | str]:
        return [self.chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]

    def on_event(self, event: pb.SolveStreamResponse) -> list[dict | str]:
        kind = event.WhichOneof("event")
        if kind == "final":
            return self.finish(event.final)
        if kind == "thinking_trace" and not self.chat.include_thinking_trace:
            return [self.content_chunk({"reasoning_content": event.thinking_trace.text})]
        if kind == "thinking_trace":
            text = event.thinking_trace.text + "\n"
        elif kind == "refine_chunk":
            text = event.refine_chunk.text
        else:
            return [kind]
        out = self.cut.feed(text)
        return [self.content_chunk({"content": out})] if out else []

    def content_chunk(self, delta: dict) -> dict:
        if "content" in delta:
            self.streamed += delta["content"]
        return self.chunk([{"index": 0, "delta": delta, "finish_reason": None}])

    def finish(self, response: pb.SolveResponse) -> list[dict | str]:
        items: list[dict | str] = []
        if tail := self.cut.flush():
            items.append(self.content_chunk({"content": tail}))
        for choice in draft_choices(response, self.chat):
            message = choice.pop("message")
            items.append(self.chunk([choice | {"delta": message}]))
        summary = extension(response)
        answer = final_content(response, self.chat)
        if answer != self.streamed:  # the refinement failed re-verification: the best draft is the answer
            summary |= {"answer_replaced": True, "answer": answer}
        status = {"status": status_name(response.status)}
        items.append(
            self.chunk([{"index": 0, "delta": {}, "finish_reason": "stop", "deliberate": status}], deliberate=summary)
        )
        if self.chat.include_usage:
            items.append(self.chunk([], usage=usage(response)))
        return items
