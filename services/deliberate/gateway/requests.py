"""OpenAI chat completion request bodies → the Scheduler's `SolveRequest`, without HTTP or gRPC: the body's shape
and types are checked here, value ranges by the Scheduler, whose errors `ChatRequest.rename` words in the body's
fields.

The mapping is documented, field by field, in docs/gateway.md#request-mapping.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from google.protobuf import json_format

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..core.requests import FINAL_TEXTS
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
    *EARLY_STOP_SWITCHES, "quorum", "confidence_stop", "final_text",
}  # fmt: skip
# `final_text`'s values: how the selected drafts become the answer (SolveRequest.final_text, docs/refiner.md).
# SolveRequest field paths in the Scheduler's errors → the body's fields (more per request: ChatRequest.renames).
RENAMES = {
    "prompt": "messages",
    "output_schema": "response_format.json_schema.schema",
    "sampling.max_new_tokens": "max_draft_tokens",
    "refine_sampling.max_new_tokens": "max_tokens",
    **{f"sampling.{name}": name for name in (*SAMPLING_FIELDS, "seed")},
}


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
    # Unless the body says, a completion read whole does without the consensus prefix, as a unary Solve does: it
    # only brings the first content forward, which nobody sees here, and lengthens refinement (docs/scheduler.md).
    disable_prefix = optional(body, "disable_consensus_prefix", bool)
    solve.disable_consensus_prefix = not optional(body, "stream", bool) if disable_prefix is None else disable_prefix
    solve.disable_default_arithmetic = optional(body, "disable_default_arithmetic", bool) or False
    for name in EARLY_STOP_SWITCHES:
        setattr(solve, name, optional(body, name, bool) or False)
    solve.quorum = optional(body, "quorum", int) or 0
    if (confidence_stop := optional(body, "confidence_stop", bool)) is not None:  # unset: the Scheduler's default
        solve.confidence_stop = confidence_stop
    if (way := optional(body, "final_text", str)) is not None:  # unset: the Scheduler's --final-text
        if way not in FINAL_TEXTS:
            raise invalid("final_text", f"must be one of {', '.join(FINAL_TEXTS)}")
        solve.final_text = FINAL_TEXTS[way]

    chat.include_thinking_trace = optional(body, "include_thinking_trace", bool) or False
    chat.stream = optional(body, "stream", bool) or False
    stream_options = optional(body, "stream_options", dict) or {}
    chat.include_usage = bool(stream_options.get("include_usage"))
    chat.stop = stop_sequences(body.get("stop"))
    choose_drafts(chat, optional(body, "n", int), optional(body, "num_drafts", int))
    return chat


def choose_drafts(chat: ChatRequest, n: int | None, num_drafts: int | None) -> None:
    """`n` choices: the answer and n - 1 drafts, so n may not exceed the drafts asked for. Without
    `num_drafts` the Scheduler chooses, except when n > 1: then it drafts n, so every choice exists — all at once,
    where the default cascade could stop after its first stage with fewer drafts than choices."""
    chat.n = 1 if n is None else n
    if chat.n < 1:
        raise invalid("n", f"must be at least 1, got {chat.n}")
    if chat.n > 1:
        chat.solve.draft_count = pb.DRAFT_COUNT_ALL_AT_ONCE
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
