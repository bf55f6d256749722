from deliberate_api.common.v1 import common_pb2 as _common_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GenerateDraftsRequest(_message.Message):
    __slots__ = ("request_id", "prompt", "num_drafts", "strategies", "sampling", "output_schema", "round", "feedback", "fast_mode", "first_index", "program_drafts", "context", "rule_packs")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    STRATEGIES_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    FAST_MODE_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    RULE_PACKS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    prompt: str
    num_drafts: int
    strategies: _containers.RepeatedScalarFieldContainer[str]
    sampling: _common_pb2.SamplingParams
    output_schema: str
    round: int
    feedback: str
    fast_mode: bool
    first_index: int
    program_drafts: int
    context: _struct_pb2.Struct
    rule_packs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request_id: _Optional[str] = ..., prompt: _Optional[str] = ..., num_drafts: _Optional[int] = ..., strategies: _Optional[_Iterable[str]] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., output_schema: _Optional[str] = ..., round: _Optional[int] = ..., feedback: _Optional[str] = ..., fast_mode: _Optional[bool] = ..., first_index: _Optional[int] = ..., program_drafts: _Optional[int] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., rule_packs: _Optional[_Iterable[str]] = ...) -> None: ...

class GenerateDraftsResponse(_message.Message):
    __slots__ = ("draft",)
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    draft: _common_pb2.Draft
    def __init__(self, draft: _Optional[_Union[_common_pb2.Draft, _Mapping]] = ...) -> None: ...

class StreamDraftsRequest(_message.Message):
    __slots__ = ("generate", "cancel")
    GENERATE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    generate: GenerateDraftsRequest
    cancel: CancelDraft
    def __init__(self, generate: _Optional[_Union[GenerateDraftsRequest, _Mapping]] = ..., cancel: _Optional[_Union[CancelDraft, _Mapping]] = ...) -> None: ...

class CancelDraft(_message.Message):
    __slots__ = ("index",)
    INDEX_FIELD_NUMBER: _ClassVar[int]
    index: int
    def __init__(self, index: _Optional[int] = ...) -> None: ...

class StreamDraftsResponse(_message.Message):
    __slots__ = ("delta", "draft")
    DELTA_FIELD_NUMBER: _ClassVar[int]
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    delta: DraftDelta
    draft: _common_pb2.Draft
    def __init__(self, delta: _Optional[_Union[DraftDelta, _Mapping]] = ..., draft: _Optional[_Union[_common_pb2.Draft, _Mapping]] = ...) -> None: ...

class DraftDelta(_message.Message):
    __slots__ = ("draft_id", "index", "text", "tokens", "token_confidences", "confidence_floor")
    DRAFT_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_CONFIDENCES_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FLOOR_FIELD_NUMBER: _ClassVar[int]
    draft_id: str
    index: int
    text: str
    tokens: int
    token_confidences: _containers.RepeatedScalarFieldContainer[float]
    confidence_floor: float
    def __init__(self, draft_id: _Optional[str] = ..., index: _Optional[int] = ..., text: _Optional[str] = ..., tokens: _Optional[int] = ..., token_confidences: _Optional[_Iterable[float]] = ..., confidence_floor: _Optional[float] = ...) -> None: ...

class GetLoadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLoadResponse(_message.Message):
    __slots__ = ("engine", "busy_sequences", "queued_sequences", "capacity", "recent_tokens_per_second", "window_seconds", "gpu_utilization", "gpu_memory_utilization")
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    BUSY_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    QUEUED_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    RECENT_TOKENS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GPU_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    engine: str
    busy_sequences: int
    queued_sequences: int
    capacity: int
    recent_tokens_per_second: float
    window_seconds: float
    gpu_utilization: float
    gpu_memory_utilization: float
    def __init__(self, engine: _Optional[str] = ..., busy_sequences: _Optional[int] = ..., queued_sequences: _Optional[int] = ..., capacity: _Optional[int] = ..., recent_tokens_per_second: _Optional[float] = ..., window_seconds: _Optional[float] = ..., gpu_utilization: _Optional[float] = ..., gpu_memory_utilization: _Optional[float] = ...) -> None: ...
