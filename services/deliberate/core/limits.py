"""Field limits, declared once per request message as data (field path -> rule) and enforced by one generic
validator at every server edge. The proto comments (`// Limits: …`) and docs/limits.md's table are written
from the same declarations (`make limits`, deliberate/limits_table.py), so a Go or TypeScript client reads the
rules the server enforces.

A field path names fields from the request down: `prompt`, `sampling.temperature`, `strategies` (the repeated
field itself, for its length), `strategies[]` (each element), `selected[].draft.text`. A bound is a number or a
`Setting` of the serving service (a flag and an environment variable). Errors are `InvalidArgument`s whose
message begins with the concrete path: `strategies[2]: has 501 characters; the limit is 500`.

Checks that need code (a JSON Schema against its metaschema, CEL compilation) stay code, called by the edge
right after these.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from pydantic import BaseModel

from .config import flag_name
from .requests import InvalidArgument


@dataclass(frozen=True)
class Setting:
    """A bound taken from the serving service's settings: `Setting("max_prompt_chars")`."""

    name: str


Bound = int | float | Setting


def resolve(bound: Bound, settings: BaseModel) -> int | float:
    return getattr(settings, bound.name) if isinstance(bound, Setting) else bound


def describe_bound(bound: Bound, settings_model: type[BaseModel]) -> str:
    """The number, or for a setting its default."""
    value = settings_model.model_fields[bound.name].default if isinstance(bound, Setting) else bound
    return f"{value:g}" if isinstance(value, float) else str(value)


def flags(*bounds: Bound) -> str:
    """` (--max-drafts)`: the settings a description's numbers are the defaults of."""
    names = [flag_name(bound.name) for bound in bounds if isinstance(bound, Setting)]
    return f" ({', '.join(names)})" if names else ""


@dataclass(frozen=True)
class Text:
    """A string field: at most `max_chars` characters; `required` also refuses an empty or blank one."""

    max_chars: Bound
    required: bool = False

    def check(self, path: str, value: str, settings: BaseModel) -> None:
        if self.required and not value.strip():
            raise InvalidArgument(path, "must not be empty")
        limit = resolve(self.max_chars, settings)
        if len(value) > limit:
            raise InvalidArgument(path, f"has {len(value)} characters; the limit is {limit}")

    def describe(self, settings_model: type[BaseModel]) -> str:
        most = f"at most {describe_bound(self.max_chars, settings_model)} characters{flags(self.max_chars)}"
        return f"required, {most}" if self.required else most


@dataclass(frozen=True)
class Range:
    """A number in [low, high]; a field with presence (proto3 `optional`) only when it is set."""

    low: Bound
    high: Bound

    def check(self, path: str, value: float, settings: BaseModel) -> None:
        low, high = resolve(self.low, settings), resolve(self.high, settings)
        if not low <= value <= high:
            raise InvalidArgument(path, f"must be in [{low}, {high}], got {value}")

    def describe(self, settings_model: type[BaseModel]) -> str:
        low, high = describe_bound(self.low, settings_model), describe_bound(self.high, settings_model)
        return f"in [{low}, {high}]{flags(self.low, self.high)}"


@dataclass(frozen=True)
class Count:
    """How many items a repeated field holds: [low, high]."""

    low: Bound
    high: Bound

    def check(self, path: str, value: list, settings: BaseModel) -> None:
        low, high = resolve(self.low, settings), resolve(self.high, settings)
        if len(value) < low:
            raise InvalidArgument(path, "must not be empty" if low == 1 else f"has {len(value)} items; at least {low}")
        if len(value) > high:
            raise InvalidArgument(path, f"has {len(value)} items; the limit is {high}")

    def describe(self, settings_model: type[BaseModel]) -> str:
        low, high = describe_bound(self.low, settings_model), describe_bound(self.high, settings_model)
        return (f"at most {high} items" if self.low == 0 else f"{low} to {high} items") + flags(self.low, self.high)


@dataclass(frozen=True)
class Bytes:
    """A message field's serialized size."""

    max_bytes: Bound

    def check(self, path: str, value: Message, settings: BaseModel) -> None:
        limit = resolve(self.max_bytes, settings)
        if value.ByteSize() > limit:
            raise InvalidArgument(path, f"has {value.ByteSize()} bytes; the limit is {limit}")

    def describe(self, settings_model: type[BaseModel]) -> str:
        return f"at most {describe_bound(self.max_bytes, settings_model)} bytes serialized{flags(self.max_bytes)}"


@dataclass(frozen=True)
class JsonObject:
    """A google.protobuf.Struct: at most `max_bytes` serialized (when given), and every number finite. The wire
    carries any double, but JSON, CEL and the rule packs reading the object have no NaN or Infinity."""

    max_bytes: Bound | None = None

    def check(self, path: str, value: Message, settings: BaseModel) -> None:
        if self.max_bytes is not None:
            Bytes(self.max_bytes).check(path, value, settings)
        found = non_finite_number(value)
        if found is not None:
            where, number = found
            raise InvalidArgument(path, f"holds {number} at {where}; numbers must be finite")

    def describe(self, settings_model: type[BaseModel]) -> str:
        finite = "finite numbers"
        return finite if self.max_bytes is None else f"{Bytes(self.max_bytes).describe(settings_model)}, {finite}"


@dataclass(frozen=True)
class OneOf:
    """A name from a registry read at check time (plugins may add names): empty, or one of `names()`."""

    names: Callable[[], list[str]]
    registry: str  # what the names are, for the description: "the registered selection policies"

    def check(self, path: str, value: str, settings: BaseModel) -> None:
        known = self.names()
        if value and value not in known:
            raise InvalidArgument(path, f"{value[:64]!r} is not one of {', '.join(known)}")

    def describe(self, settings_model: type[BaseModel]) -> str:
        return f"empty or one of {self.registry} ({', '.join(self.names())})"


def non_finite_number(struct: Message) -> tuple[str, float] | None:
    """(JSON path, number) of the first NaN or infinity in a Struct, None when there is none; iterative, so
    nesting as deep as the wire allows costs no stack."""
    stack: list[tuple[str, Message]] = [("$", struct)]
    while stack:
        where, message = stack.pop()
        if message.DESCRIPTOR.name == "Struct":
            stack.extend((f"{where}.{key}", value) for key, value in message.fields.items())
        elif message.DESCRIPTOR.name == "ListValue":
            stack.extend((f"{where}[{i}]", value) for i, value in enumerate(message.values))
        else:  # a Value
            kind = message.WhichOneof("kind")
            if kind == "number_value" and not math.isfinite(message.number_value):
                return where, message.number_value
            if kind in ("struct_value", "list_value"):
                stack.append((where, getattr(message, kind)))
    return None


Rule = Text | Range | Count | Bytes | JsonObject | OneOf


def nested(prefix: str, limits: dict[str, Rule]) -> dict[str, Rule]:
    """A sub-message's limits under the field that holds it: `nested("sampling", SAMPLING)`."""
    return {f"{prefix}.{path}": rule for path, rule in limits.items()}


@dataclass(frozen=True)
class MessageLimits:
    """One request message's limits and the settings model its bounds come from."""

    message: type[Message]
    settings_model: type[BaseModel]
    fields: dict[str, Rule]

    def __post_init__(self) -> None:
        for path in self.fields:  # a misspelt path fails at import, not at the first request
            field_chain(self.message.DESCRIPTOR, path)

    def check(self, request: Message, settings: BaseModel) -> None:
        """Raises InvalidArgument for the first field, in declaration order, that breaks its rule."""
        for path, rule in self.fields.items():
            for concrete, value in values_at(request, path.split(".")):
                rule.check(concrete, value, settings)


def field_chain(descriptor: Descriptor, path: str) -> list[FieldDescriptor]:
    """The fields a declared path goes through; KeyError for a path the message does not have."""
    chain = []
    segments = path.split(".")
    for depth, segment in enumerate(segments, start=1):
        name, each = segment.removesuffix("[]"), segment.endswith("[]")
        if descriptor is None or name not in descriptor.fields_by_name:
            raise KeyError(f"{path}: no field {name!r} in {descriptor.full_name if descriptor else 'a scalar'}")
        field = descriptor.fields_by_name[name]
        # `[]` only on a repeated field, and needed on one the path goes through (a last one may be counted)
        if (each and not field.is_repeated) or (field.is_repeated and not each and depth < len(segments)):
            raise KeyError(f"{path}: {name!r} is {'' if field.is_repeated else 'not '}repeated")
        chain.append(field)
        descriptor = field.message_type
    return chain


def values_at(message: Message, segments: list[str], prefix: str = "") -> Iterator[tuple[str, object]]:
    """(concrete path, value) for every value a declared path reaches; unset optional fields reach none."""
    segment, *rest = segments
    name = segment.removesuffix("[]")
    path = prefix + name
    field = message.DESCRIPTOR.fields_by_name[name]
    if segment.endswith("[]"):
        found = [(f"{path}[{i}]", item) for i, item in enumerate(getattr(message, name))]
    elif field.has_presence and not message.HasField(name):
        found = []
    else:
        found = [(path, getattr(message, name))]
    for concrete, value in found:
        if rest:
            yield from values_at(value, rest, concrete + ".")
        elif field.type == FieldDescriptor.TYPE_FLOAT and not field.is_repeated:
            # A 32-bit float reads back as 0.009999999776 for the 0.01 the client sent: compare what was meant.
            yield concrete, float(f"{value:.7g}")
        else:
            yield concrete, value


# The constraints and the context they read (deliberate.common.v1.Constraint), wherever a request carries them:
# the Verifier compiles them, and the Scheduler refuses them before any stage runs.
MAX_CONSTRAINTS = 32
MAX_CEL_CHARS = 2048
MAX_CONTEXT_BYTES = 1024 * 1024
CONSTRAINTS: dict[str, Rule] = {
    "constraints": Count(0, MAX_CONSTRAINTS),
    "constraints[].cel_expression": Text(MAX_CEL_CHARS),
    "constraints[].params": JsonObject(),
    "context": JsonObject(MAX_CONTEXT_BYTES),
}
# The data a decision program reads as `ctx` in the Verifier's sandbox (and the Drafter describes): a request with
# more has no program drafts by default, and one that asks for them is refused naming `context`.
MAX_DECISION_DATA_BYTES = 256 * 1024
# A rule pack's name where a request names one for the Drafter's decision prompt (GenerateDraftsRequest.rule_packs).
MAX_RULE_PACK_NAME_CHARS = 128

# deliberate.common.v1.SamplingParams, wherever a request carries one.
SAMPLING: dict[str, Rule] = {
    "temperature": Range(0.0, 2.0),
    "top_p": Range(0.01, 1.0),
    "max_new_tokens": Range(1, Setting("max_new_tokens_limit")),
    "presence_penalty": Range(-2.0, 2.0),
    "frequency_penalty": Range(-2.0, 2.0),
}
