from deliberate_api.common.v1 import common_pb2 as _common_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VerifyDraftsRequest(_message.Message):
    __slots__ = ("request_id", "prompt", "drafts", "output_schema", "constraints", "context", "report_computations")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    DRAFTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    REPORT_COMPUTATIONS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    prompt: str
    drafts: _containers.RepeatedCompositeFieldContainer[_common_pb2.Draft]
    output_schema: str
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    context: _struct_pb2.Struct
    report_computations: bool
    def __init__(self, request_id: _Optional[str] = ..., prompt: _Optional[str] = ..., drafts: _Optional[_Iterable[_Union[_common_pb2.Draft, _Mapping]]] = ..., output_schema: _Optional[str] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., report_computations: _Optional[bool] = ...) -> None: ...

class VerifyDraftsResponse(_message.Message):
    __slots__ = ("verdicts",)
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    verdicts: _containers.RepeatedCompositeFieldContainer[_common_pb2.DraftVerdict]
    def __init__(self, verdicts: _Optional[_Iterable[_Union[_common_pb2.DraftVerdict, _Mapping]]] = ...) -> None: ...

class CheckConstraintsRequest(_message.Message):
    __slots__ = ("output_schema", "constraints", "context")
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    output_schema: str
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    context: _struct_pb2.Struct
    def __init__(self, output_schema: _Optional[str] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CheckConstraintsResponse(_message.Message):
    __slots__ = ("rule_ids", "reference_plan")
    RULE_IDS_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_PLAN_FIELD_NUMBER: _ClassVar[int]
    rule_ids: _containers.RepeatedScalarFieldContainer[str]
    reference_plan: _common_pb2.ReferencePlan
    def __init__(self, rule_ids: _Optional[_Iterable[str]] = ..., reference_plan: _Optional[_Union[_common_pb2.ReferencePlan, _Mapping]] = ...) -> None: ...

class VerifyStreamRequest(_message.Message):
    __slots__ = ("start", "delta", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: VerifyStreamStart
    delta: DraftTextDelta
    end: _common_pb2.Draft
    def __init__(self, start: _Optional[_Union[VerifyStreamStart, _Mapping]] = ..., delta: _Optional[_Union[DraftTextDelta, _Mapping]] = ..., end: _Optional[_Union[_common_pb2.Draft, _Mapping]] = ...) -> None: ...

class VerifyStreamStart(_message.Message):
    __slots__ = ("request_id", "prompt", "output_schema", "constraints", "context", "report_computations")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    REPORT_COMPUTATIONS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    prompt: str
    output_schema: str
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    context: _struct_pb2.Struct
    report_computations: bool
    def __init__(self, request_id: _Optional[str] = ..., prompt: _Optional[str] = ..., output_schema: _Optional[str] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., report_computations: _Optional[bool] = ...) -> None: ...

class DraftTextDelta(_message.Message):
    __slots__ = ("draft_id", "text", "tokens")
    DRAFT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    draft_id: str
    text: str
    tokens: int
    def __init__(self, draft_id: _Optional[str] = ..., text: _Optional[str] = ..., tokens: _Optional[int] = ...) -> None: ...

class VerifyStreamResponse(_message.Message):
    __slots__ = ("verdict", "early")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    EARLY_FIELD_NUMBER: _ClassVar[int]
    verdict: _common_pb2.DraftVerdict
    early: bool
    def __init__(self, verdict: _Optional[_Union[_common_pb2.DraftVerdict, _Mapping]] = ..., early: _Optional[bool] = ...) -> None: ...
