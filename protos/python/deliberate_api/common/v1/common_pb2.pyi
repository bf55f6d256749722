import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_ABORTED: _ClassVar[FinishReason]
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_ABORTED: FinishReason

class SamplingParams(_message.Message):
    __slots__ = ("temperature", "top_p", "max_new_tokens", "presence_penalty", "frequency_penalty", "seed")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    max_new_tokens: int
    presence_penalty: float
    frequency_penalty: float
    seed: int
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., max_new_tokens: _Optional[int] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., seed: _Optional[int] = ...) -> None: ...

class Constraint(_message.Message):
    __slots__ = ("id", "json_schema", "cel_expression", "rule_pack", "soft", "params", "failure_message")
    ID_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    CEL_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    RULE_PACK_FIELD_NUMBER: _ClassVar[int]
    SOFT_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    json_schema: str
    cel_expression: str
    rule_pack: str
    soft: bool
    params: _struct_pb2.Struct
    failure_message: str
    def __init__(self, id: _Optional[str] = ..., json_schema: _Optional[str] = ..., cel_expression: _Optional[str] = ..., rule_pack: _Optional[str] = ..., soft: _Optional[bool] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., failure_message: _Optional[str] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ...) -> None: ...

class Draft(_message.Message):
    __slots__ = ("id", "index", "strategy", "text", "usage", "finish_reason", "generation_latency", "kind", "confidence")
    ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATION_LATENCY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    id: str
    index: int
    strategy: str
    text: str
    usage: TokenUsage
    finish_reason: FinishReason
    generation_latency: _duration_pb2.Duration
    kind: str
    confidence: DraftConfidence
    def __init__(self, id: _Optional[str] = ..., index: _Optional[int] = ..., strategy: _Optional[str] = ..., text: _Optional[str] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., generation_latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., kind: _Optional[str] = ..., confidence: _Optional[_Union[DraftConfidence, _Mapping]] = ...) -> None: ...

class DraftConfidence(_message.Message):
    __slots__ = ("tokens", "mean_logprob", "min_window", "last_window", "answer", "window_tokens", "top_k", "token_logprobs", "token_confidences", "token_ends")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    MEAN_LOGPROB_FIELD_NUMBER: _ClassVar[int]
    MIN_WINDOW_FIELD_NUMBER: _ClassVar[int]
    LAST_WINDOW_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    WINDOW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    TOKEN_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_CONFIDENCES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENDS_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    mean_logprob: float
    min_window: float
    last_window: float
    answer: float
    window_tokens: int
    top_k: int
    token_logprobs: _containers.RepeatedScalarFieldContainer[float]
    token_confidences: _containers.RepeatedScalarFieldContainer[float]
    token_ends: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, tokens: _Optional[int] = ..., mean_logprob: _Optional[float] = ..., min_window: _Optional[float] = ..., last_window: _Optional[float] = ..., answer: _Optional[float] = ..., window_tokens: _Optional[int] = ..., top_k: _Optional[int] = ..., token_logprobs: _Optional[_Iterable[float]] = ..., token_confidences: _Optional[_Iterable[float]] = ..., token_ends: _Optional[_Iterable[int]] = ...) -> None: ...

class RuleResult(_message.Message):
    __slots__ = ("rule_id", "passed", "message", "hard", "duration", "abstained", "substantive", "failed_at")
    RULE_ID_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HARD_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ABSTAINED_FIELD_NUMBER: _ClassVar[int]
    SUBSTANTIVE_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_FIELD_NUMBER: _ClassVar[int]
    rule_id: str
    passed: bool
    message: str
    hard: bool
    duration: _duration_pb2.Duration
    abstained: bool
    substantive: bool
    failed_at: DraftPosition
    def __init__(self, rule_id: _Optional[str] = ..., passed: _Optional[bool] = ..., message: _Optional[str] = ..., hard: _Optional[bool] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., abstained: _Optional[bool] = ..., substantive: _Optional[bool] = ..., failed_at: _Optional[_Union[DraftPosition, _Mapping]] = ...) -> None: ...

class DraftPosition(_message.Message):
    __slots__ = ("chars", "tokens", "line")
    CHARS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    chars: int
    tokens: int
    line: int
    def __init__(self, chars: _Optional[int] = ..., tokens: _Optional[int] = ..., line: _Optional[int] = ...) -> None: ...

class JudgeVerdict(_message.Message):
    __slots__ = ("valid", "score", "error", "latency", "hard")
    VALID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    HARD_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    score: float
    error: str
    latency: _duration_pb2.Duration
    hard: bool
    def __init__(self, valid: _Optional[bool] = ..., score: _Optional[float] = ..., error: _Optional[str] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., hard: _Optional[bool] = ...) -> None: ...

class DraftVerdict(_message.Message):
    __slots__ = ("draft_id", "valid", "score", "rule_results", "extracted_answer", "latency", "judge", "evidence", "computations", "quality")
    DRAFT_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    RULE_RESULTS_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_ANSWER_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    COMPUTATIONS_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    draft_id: str
    valid: bool
    score: float
    rule_results: _containers.RepeatedCompositeFieldContainer[RuleResult]
    extracted_answer: str
    latency: _duration_pb2.Duration
    judge: JudgeVerdict
    evidence: _containers.RepeatedScalarFieldContainer[str]
    computations: _containers.RepeatedCompositeFieldContainer[Computation]
    quality: PlanQuality
    def __init__(self, draft_id: _Optional[str] = ..., valid: _Optional[bool] = ..., score: _Optional[float] = ..., rule_results: _Optional[_Iterable[_Union[RuleResult, _Mapping]]] = ..., extracted_answer: _Optional[str] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., judge: _Optional[_Union[JudgeVerdict, _Mapping]] = ..., evidence: _Optional[_Iterable[str]] = ..., computations: _Optional[_Iterable[_Union[Computation, _Mapping]]] = ..., quality: _Optional[_Union[PlanQuality, _Mapping]] = ...) -> None: ...

class ReferencePlan(_message.Message):
    __slots__ = ("answer", "quality", "rule_pack")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    RULE_PACK_FIELD_NUMBER: _ClassVar[int]
    answer: str
    quality: PlanQuality
    rule_pack: str
    def __init__(self, answer: _Optional[str] = ..., quality: _Optional[_Union[PlanQuality, _Mapping]] = ..., rule_pack: _Optional[str] = ...) -> None: ...

class PlanQuality(_message.Message):
    __slots__ = ("name", "objective", "bound", "ratio", "description", "rule_pack")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    RATIO_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    RULE_PACK_FIELD_NUMBER: _ClassVar[int]
    name: str
    objective: float
    bound: float
    ratio: float
    description: str
    rule_pack: str
    def __init__(self, name: _Optional[str] = ..., objective: _Optional[float] = ..., bound: _Optional[float] = ..., ratio: _Optional[float] = ..., description: _Optional[str] = ..., rule_pack: _Optional[str] = ...) -> None: ...

class Computation(_message.Message):
    __slots__ = ("key", "line")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    key: str
    line: int
    def __init__(self, key: _Optional[str] = ..., line: _Optional[int] = ...) -> None: ...
