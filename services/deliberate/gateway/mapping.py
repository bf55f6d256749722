"""OpenAI chat completions ↔ the Scheduler's contract, without HTTP or gRPC: a request body becomes a
`SolveRequest`, a `SolveResponse` (or a `SolveStream`'s events) becomes a chat completion (or its chunks).

The mapping is documented, field by field, in docs/gateway.md.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from google.protobuf import json_format

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from .errors import ApiError, invalid

# Drafting sampling: these OpenAI fields keep their names in SolveRequest.sampling.
SAMPLING_FIELDS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
# Fields a client may send that change nothing here (bookkeeping of OpenAI's platform).
IGNORED_FIELDS = {"user", "store", "metadata", "service_tier", "parallel_tool_calls"}
# Features this gateway does not have: refused unless absent or off, never silently dropped.
UNSUPPORTED_FIELDS = {
    "tools", "tool_choice", "functions", "function_call", "logprobs", "top_logprobs", "logit_bias", "audio",
    "prediction", "web_search_options",
}  # fmt: skip
OPENAI_FIELDS = {
    "model", "messages", "n", "stream", "stream_options", "max_tokens", "max_completion_tokens", "seed", "stop",
    "response_format", "modalities", *SAMPLING_FIELDS,
}  # fmt: skip
# Early stopping's switches (docs/scheduler.md#early-stopping): booleans under the SolveRequest's names.
EARLY_STOP_SWITCHES = ("disable_streaming_verification", "disable_quorum", "replace_aborted_drafts")
# The request body's fields beyond OpenAI's (docs/gateway.md#extension-fields).
EXTENSION_FIELDS = {
    "num_drafts", "max_draft_tokens", "constraints", "rule_packs", "context", "strategy_hints", "request_id",
    "include_thinking_trace", "disable_consensus_prefix", "disable_default_arithmetic",
    *EARLY_STOP_SWITCHES, "quorum",
}  # fmt: skip
# SolveRequest field paths in the Scheduler's errors → the body's fields (more per request: ChatRequest.renames).
RENAMES = {
    "prompt": "messages",
    "output_schema": "response_format.json_schema.schema",
    "sampling.max_new_tokens": "max_draft_tokens",
    "refine_sampling.max_new_tokens": "max_tokens",
    **{f"sampling.{name}": name for name in (*SAMPLING_FIELDS, "seed")},
}
FINISH_REASONS = {common_pb2.FINISH_REASON_LENGTH: "length", common_pb2.FINISH_REASON_ABORTED: "length"}


@dataclass
class ChatRequest:
    """A parsed chat completion request: the SolveRequest and what shapes the answer."""

    solve: pb.SolveRequest
    model: str
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    include_thinking_trace: bool = False
    stop: list[str] = field(default_factory=list)
    # SolveRequest field path → the body's field, for errors (e.g. "refine_sampling.max_new_tokens" → "max_tokens").
    renames: dict[str, str] = field(default_factory=lambda: dict(RENAMES))
    num_constraints: int = 0  # constraints[i] with i past this index came from rule_packs

    @property
    def completion_id(self) -> str:
        return f"chatcmpl-{self.solve.request_id}"

    def rename(self, path: str) -> str:
        """The request body's name for a SolveRequest field path in a Scheduler error."""
        for prefix, name in sorted(self.renames.items(), key=lambda item: -len(item[0])):
            if path == prefix or path.startswith((prefix + ".", prefix + "[")):
                return name + path[len(prefix) :]
        if path.startswith("constraints["):
            index, rest = path[len("constraints[") :].split("]", 1)
            if index.isdigit() and int(index) >= self.num_constraints:
                return f"rule_packs[{int(index) - self.num_constraints}]{rest}"
        return path


def parse_chat_request(body: object, model_name: str) -> ChatRequest:
    """Checks the body's shape and types and builds the SolveRequest; value ranges are the Scheduler's to
    check (its limits, one place), and its errors are renamed back to these fields (`ChatRequest.rename`)."""
    if not isinstance(body, dict):
        raise invalid("body", "must be a JSON object")
    for name, value in body.items():
        if name in UNSUPPORTED_FIELDS and value not in (None, False, [], {}, "none"):
            raise invalid(name, "is not supported by this server (docs/gateway.md)")
        if name not in OPENAI_FIELDS | EXTENSION_FIELDS | IGNORED_FIELDS | UNSUPPORTED_FIELDS:
            raise invalid(name, "unrecognized request field")
    model = body.get("model")
    if model != model_name:
        raise ApiError(404, f"model: {model!r} does not exist; this server serves {model_name!r}", param="model",
                       code="model_not_found")  # fmt: skip
    if body.get("modalities") not in (None, ["text"]):
        raise invalid("modalities", 'only ["text"] is supported')

    chat = ChatRequest(solve=pb.SolveRequest(prompt=render_prompt(body.get("messages"))), model=model)
    solve = chat.solve
    solve.request_id = optional(body, "request_id", str) or uuid.uuid4().hex

    for name in SAMPLING_FIELDS:
        if (value := optional(body, name, float)) is not None:
            setattr(solve.sampling, name, value)
    if (seed := optional(body, "seed", int)) is not None:
        solve.sampling.seed = seed
    if (draft_tokens := optional(body, "max_draft_tokens", int)) is not None:
        solve.sampling.max_new_tokens = draft_tokens
    for name in ("max_completion_tokens", "max_tokens"):  # the newer name wins when both are given
        if (tokens := optional(body, name, int)) is not None:
            solve.refine_sampling.max_new_tokens = tokens
            chat.renames["refine_sampling.max_new_tokens"] = name
            break

    solve.output_schema = output_schema(body.get("response_format"))
    constraints = [constraint(item, f"constraints[{i}]") for i, item in enumerate(array(body, "constraints"))]
    chat.num_constraints = len(constraints)
    constraints += [rule_pack(item, f"rule_packs[{i}]") for i, item in enumerate(array(body, "rule_packs"))]
    solve.constraints.extend(constraints)
    if (context := optional(body, "context", dict)) is not None:
        solve.context.update(context)
    for i, hint in enumerate(array(body, "strategy_hints")):
        if not isinstance(hint, str):
            raise invalid(f"strategy_hints[{i}]", "must be a string")
        solve.strategy_hints.append(hint)
    solve.disable_consensus_prefix = optional(body, "disable_consensus_prefix", bool) or False
    solve.disable_default_arithmetic = optional(body, "disable_default_arithmetic", bool) or False
    for name in EARLY_STOP_SWITCHES:
        setattr(solve, name, optional(body, name, bool) or False)
    solve.quorum = optional(body, "quorum", int) or 0

    chat.include_thinking_trace = optional(body, "include_thinking_trace", bool) or False
    chat.stream = optional(body, "stream", bool) or False
    stream_options = optional(body, "stream_options", dict) or {}
    chat.include_usage = bool(stream_options.get("include_usage"))
    chat.stop = stop_sequences(body.get("stop"))
    choose_drafts(chat, optional(body, "n", int), optional(body, "num_drafts", int))
    return chat


def choose_drafts(chat: ChatRequest, n: int | None, num_drafts: int | None) -> None:
    """`n` choices: the answer and n - 1 drafts, so n may not exceed the drafts asked for. Without
    `num_drafts` the Scheduler chooses, except when n > 1: then it drafts n, so every choice exists."""
    chat.n = 1 if n is None else n
    if chat.n < 1:
        raise invalid("n", f"must be at least 1, got {chat.n}")
    if num_drafts:
        if chat.n > num_drafts:
            raise invalid("n", f"asks for {chat.n} choices but num_drafts is {num_drafts}: choice 0 is the answer, "
                               "the others are drafts, and there cannot be more choices than drafts")  # fmt: skip
        chat.solve.num_drafts = num_drafts
    elif num_drafts is None and chat.n > 1:
        chat.solve.num_drafts = chat.n
        chat.renames["num_drafts"] = "n"
    else:
        chat.solve.num_drafts = num_drafts or 0


def render_prompt(messages: object) -> str:
    """System (and developer) messages first, as one block; then the conversation: a lone user message as it
    is, several turns as `User: …` / `Assistant: …` paragraphs. The last message must be the user's."""
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "must be a non-empty array of messages")
    system: list[str] = []
    turns: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise invalid(f"messages[{i}]", "must be an object with role and content")
        role = message.get("role")
        text = message_text(message.get("content"), f"messages[{i}].content")
        if role in ("system", "developer"):
            system.append(text)
        elif role in ("user", "assistant"):
            turns.append((role, text))
        else:
            raise invalid(f"messages[{i}].role", f"must be system, developer, user or assistant, got {role!r}")
    if not turns or turns[-1][0] != "user":
        raise invalid("messages", "the last message must be the user's")
    conversation = turns[0][1] if len(turns) == 1 else "\n\n".join(f"{r.capitalize()}: {t}" for r, t in turns)
    return "\n\n".join([*system, conversation])


def message_text(content: object, where: str) -> str:
    """A message's text: a string, or text parts ({"type": "text", "text": …}) joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(where, "must be a string or an array of text parts")
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise invalid(f"{where}[{j}]", 'only text parts ({"type": "text", "text": …}) are supported')
        texts.append(part["text"])
    return "".join(texts)


def output_schema(response_format: object) -> str:
    """`json_schema` → its schema as the output schema; `json_object` → any object; `text` → free text."""
    if response_format is None:
        return ""
    if not isinstance(response_format, dict):
        raise invalid("response_format", "must be an object")
    kind = response_format.get("type")
    if kind == "text":
        return ""
    if kind == "json_object":
        return '{"type": "object"}'
    if kind != "json_schema":
        raise invalid("response_format.type", f"must be text, json_object or json_schema, got {kind!r}")
    schema = (response_format.get("json_schema") or {}).get("schema")
    if not isinstance(schema, dict):
        raise invalid("response_format.json_schema.schema", "is required: a JSON Schema object")
    return json.dumps(schema)


def constraint(item: object, where: str) -> common_pb2.Constraint:
    """A Constraint in protobuf's JSON mapping (`celExpression` or `cel_expression`, …)."""
    if not isinstance(item, dict):
        raise invalid(where, "must be an object (a Constraint in protobuf's JSON mapping)")
    try:
        return json_format.ParseDict(item, common_pb2.Constraint())
    except json_format.ParseError as error:
        raise invalid(where, str(error)) from None


def rule_pack(item: object, where: str) -> common_pb2.Constraint:
    """A rule pack by name ("ad_selection"), or {"name", "params", "soft", "id"}."""
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise invalid(where, 'must be a rule pack name or {"name": …, "params": {…}}')
    unknown = set(item) - {"name", "params", "soft", "id"}
    if unknown:
        raise invalid(f"{where}.{sorted(unknown)[0]}", "unrecognized field (name, params, soft, id)")
    return constraint(
        {"rulePack": item["name"], "params": item.get("params") or {}, "soft": bool(item.get("soft")),
         "id": item.get("id", "")},
        where,
    )  # fmt: skip


def stop_sequences(stop: object) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops) or len(stops) > 4:
        raise invalid("stop", "must be a string or an array of at most 4 strings")
    return [s for s in stops if s]


def optional(body: dict, name: str, kind: type):
    """body[name] checked to be of `kind` (an int is a float too; a bool is neither); None when absent."""
    value = body.get(name)
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        names = {float: "a number", int: "an integer", bool: "true or false", str: "a string", dict: "an object"}
        raise invalid(name, f"must be {names[kind]}")
    return value


def array(body: dict, name: str) -> list:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid(name, "must be an array")
    return value


class StopFilter:
    """Cuts text at the first stop sequence (not included), also when the text arrives in pieces: a piece's tail
    that may begin a stop sequence is held back until the next piece decides."""

    def __init__(self, stops: list[str]):
        self.stops = stops
        self.pending = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        self.pending += text
        cuts = [i for s in self.stops if (i := self.pending.find(s)) >= 0]
        if cuts:
            out, self.pending, self.stopped = self.pending[: min(cuts)], "", True
            return out
        hold = max((k for s in self.stops for k in range(1, len(s)) if self.pending.endswith(s[:k])), default=0)
        out = self.pending[: len(self.pending) - hold]
        self.pending = self.pending[len(out) :]
        return out

    def flush(self) -> str:
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out


def apply_stop(text: str, stops: list[str]) -> str:
    cut = StopFilter(stops)
    return cut.feed(text) + cut.flush()


# --- responses ---------------------------------------------------------------------------------------------------


def status_name(status: int) -> str:
    return pb.SolveStatus.Name(status).removeprefix("SOLVE_STATUS_").lower()


def answer_text(response: pb.SolveResponse, include_thinking_trace: bool) -> str:
    """The answer without its leading thinking-trace marker (unless asked for it)."""
    if include_thinking_trace or not response.thinking_trace:
        return response.answer
    return response.answer.removeprefix(response.thinking_trace).lstrip("\n")


def final_content(response: pb.SolveResponse, chat: ChatRequest) -> str:
    """Choice 0's content: the answer, its thinking trace taken off (unless asked for), cut at a stop sequence."""
    return apply_stop(answer_text(response, chat.include_thinking_trace), chat.stop)


def ranked_drafts(response: pb.SolveResponse) -> list[pb.DraftReport]:
    """The next-best drafts after the answer: valid ones first, the selected first among them, then by
    selection score, Verifier score, round and index."""
    return sorted(
        response.drafts,
        key=lambda r: (not r.verdict.valid, not r.selected, -r.components.final, -r.verdict.score, r.round,
                       r.draft.index),
    )  # fmt: skip


def draft_summary(report: pb.DraftReport) -> dict:
    verdict, draft = report.verdict, report.draft
    summary = {
        "id": draft.id,
        "index": draft.index,
        "round": report.round,
        "strategy": draft.strategy,
        "valid": verdict.valid,
        "score": round(verdict.score, 4),
        "selected": report.selected,
        "extracted_answer": verdict.extracted_answer,
        "passed": [r.rule_id for r in verdict.rule_results if r.passed and not r.abstained],
        "errors": [r.message for r in verdict.rule_results if not r.passed],
        "evidence": list(verdict.evidence),
        "finish_reason": FINISH_REASONS.get(draft.finish_reason, "stop"),
        "completion_tokens": draft.usage.completion_tokens,
    }
    if report.duplicate_of:
        summary["duplicate_of"] = report.duplicate_of
    return summary


def usage(response: pb.SolveResponse) -> dict:
    """Every stage's tokens: all drafts (every round) and the refinement."""
    prompt, completion = response.usage.prompt_tokens, response.usage.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def extension(response: pb.SolveResponse) -> dict:
    """The one `deliberate` field: status, per-draft verdicts, trace id, stage timings, tokens by stage."""
    timings = response.timings
    drafted = [report.draft.usage for report in response.drafts]
    draft_tokens = {
        "prompt_tokens": sum(u.prompt_tokens for u in drafted),
        "completion_tokens": sum(u.completion_tokens for u in drafted),
    }
    return {
        "request_id": response.request_id,
        "status": status_name(response.status),
        "status_reason": response.status_reason,
        "verified_by": list(response.verified_by),
        "trace_id": response.trace_id,
        "timings_s": {
            stage: round(getattr(timings, stage).ToTimedelta().total_seconds(), 4)
            for stage in ("draft", "verify", "select", "refine", "total")
        },
        "num_drafts": response.num_drafts,
        "num_drafts_reason": response.num_drafts_reason,
        "rounds": response.rounds,
        "selected_draft_ids": list(response.selected_draft_ids),
        "drafts": [draft_summary(report) for report in response.drafts],
        "refine_token_budget": response.refine_token_budget,
        "refine_budget_reason": response.refine_budget_reason,
        "tokens": {
            "drafts": draft_tokens,
            "refine": {
                "prompt_tokens": response.usage.prompt_tokens - draft_tokens["prompt_tokens"],
                "completion_tokens": response.usage.completion_tokens - draft_tokens["completion_tokens"],
            },
        },
    }


def draft_choices(response: pb.SolveResponse, chat: ChatRequest) -> list[dict]:
    """Choices 1 … n - 1: the next-best drafts, each with its verdict in the choice's `deliberate` field."""
    choices = []
    for index, report in enumerate(ranked_drafts(response)[: chat.n - 1], start=1):
        text = apply_stop(report.draft.text, chat.stop)
        choices.append(
            {
                "index": index,
                "message": {"role": "assistant", "content": text},
                "finish_reason": FINISH_REASONS.get(report.draft.finish_reason, "stop"),
                "logprobs": None,
                "deliberate": {
                    "draft_id": report.draft.id,
                    "status": "valid" if report.verdict.valid else "invalid",
                    "score": round(report.verdict.score, 4),
                    "selected": report.selected,
                },
            }
        )
    return choices


def completion(response: pb.SolveResponse, chat: ChatRequest, created: int) -> dict:
    message = {"role": "assistant", "content": final_content(response, chat)}
    if response.thinking_trace and not chat.include_thinking_trace:
        message["reasoning_content"] = response.thinking_trace
    answer = {
        "index": 0,
        "message": message,
        "finish_reason": "stop",
        "logprobs": None,
        "deliberate": {"status": status_name(response.status)},
    }
    return {
        "id": chat.completion_id,
        "object": "chat.completion",
        "created": created,
        "model": chat.model,
        "choices": [answer, *draft_choices(response, chat)],
        "usage": usage(response),
        "deliberate": extension(response),
    }


class StreamTranslator:
    """SolveStream events → chat.completion.chunk objects (dicts) and SSE comments (str, for stage events
    before the answer: they keep the connection alive and show progress without breaking OpenAI's parsers).

    The refinement streams as choice 0's content; its first chunk is the thinking-trace marker, which goes to
    `delta.reasoning_content` unless the request asked for it in the content. The final event adds the draft
    choices, the `deliberate` field and, with stream_options.include_usage, a usage chunk."""

    def __init__(self, chat: ChatRequest, created: int):
        self.chat = chat
        self.created = created
        self.cut = StopFilter(chat.stop)
        self.streamed = ""
        self.trace_pending = not chat.include_thinking_trace

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
        if kind != "refine_chunk":
            return [kind]
        text = event.refine_chunk.text
        if self.trace_pending:
            self.trace_pending = False
            return [self.content_chunk({"reasoning_content": text.rstrip("\n")})]
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
