from deliberate_api.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VerifiedDraft(_message.Message):
    __slots__ = ("draft", "verdict")
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    draft: _common_pb2.Draft
    verdict: _common_pb2.DraftVerdict
    def __init__(self, draft: _Optional[_Union[_common_pb2.Draft, _Mapping]] = ..., verdict: _Optional[_Union[_common_pb2.DraftVerdict, _Mapping]] = ...) -> None: ...

class RefineRequest(_message.Message):
    __slots__ = ("request_id", "prompt", "selected", "all_drafts", "sampling", "output_schema", "disable_thinking_trace", "disable_consensus_prefix", "consensus_prefix")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    ALL_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    DISABLE_THINKING_TRACE_FIELD_NUMBER: _ClassVar[int]
    DISABLE_CONSENSUS_PREFIX_FIELD_NUMBER: _ClassVar[int]
    CONSENSUS_PREFIX_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    prompt: str
    selected: _containers.RepeatedCompositeFieldContainer[VerifiedDraft]
    all_drafts: _containers.RepeatedCompositeFieldContainer[_common_pb2.Draft]
    sampling: _common_pb2.SamplingParams
    output_schema: str
    disable_thinking_trace: bool
    disable_consensus_prefix: bool
    consensus_prefix: str
    def __init__(self, request_id: _Optional[str] = ..., prompt: _Optional[str] = ..., selected: _Optional[_Iterable[_Union[VerifiedDraft, _Mapping]]] = ..., all_drafts: _Optional[_Iterable[_Union[_common_pb2.Draft, _Mapping]]] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., output_schema: _Optional[str] = ..., disable_thinking_trace: _Optional[bool] = ..., disable_consensus_prefix: _Optional[bool] = ..., consensus_prefix: _Optional[str] = ...) -> None: ...

class RefineResponse(_message.Message):
    __slots__ = ("chunk", "final")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    chunk: RefineChunk
    final: RefineFinal
    def __init__(self, chunk: _Optional[_Union[RefineChunk, _Mapping]] = ..., final: _Optional[_Union[RefineFinal, _Mapping]] = ...) -> None: ...

class RefineChunk(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class RefineFinal(_message.Message):
    __slots__ = ("text", "thinking_trace", "usage", "finish_reason", "consensus_prefix", "token_budget", "budget_reason")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    THINKING_TRACE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    CONSENSUS_PREFIX_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    BUDGET_REASON_FIELD_NUMBER: _ClassVar[int]
    text: str
    thinking_trace: str
    usage: _common_pb2.TokenUsage
    finish_reason: _common_pb2.FinishReason
    consensus_prefix: str
    token_budget: int
    budget_reason: str
    def __init__(self, text: _Optional[str] = ..., thinking_trace: _Optional[str] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., finish_reason: _Optional[_Union[_common_pb2.FinishReason, str]] = ..., consensus_prefix: _Optional[str] = ..., token_budget: _Optional[int] = ..., budget_reason: _Optional[str] = ...) -> None: ...
