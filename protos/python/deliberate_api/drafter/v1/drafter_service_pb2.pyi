from deliberate_api.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GenerateDraftsRequest(_message.Message):
    __slots__ = ("request_id", "prompt", "num_drafts", "strategies", "sampling", "output_schema", "round", "feedback", "fast_mode")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    STRATEGIES_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    FAST_MODE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    prompt: str
    num_drafts: int
    strategies: _containers.RepeatedScalarFieldContainer[str]
    sampling: _common_pb2.SamplingParams
    output_schema: str
    round: int
    feedback: str
    fast_mode: bool
    def __init__(self, request_id: _Optional[str] = ..., prompt: _Optional[str] = ..., num_drafts: _Optional[int] = ..., strategies: _Optional[_Iterable[str]] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., output_schema: _Optional[str] = ..., round: _Optional[int] = ..., feedback: _Optional[str] = ..., fast_mode: _Optional[bool] = ...) -> None: ...

class GenerateDraftsResponse(_message.Message):
    __slots__ = ("draft",)
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    draft: _common_pb2.Draft
    def __init__(self, draft: _Optional[_Union[_common_pb2.Draft, _Mapping]] = ...) -> None: ...
