import datetime

from deliberate_api.common.v1 import common_pb2 as _common_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FinalText(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINAL_TEXT_UNSPECIFIED: _ClassVar[FinalText]
    FINAL_TEXT_PASS_THROUGH: _ClassVar[FinalText]
    FINAL_TEXT_REFINE: _ClassVar[FinalText]
    FINAL_TEXT_CONSENSUS_PREFIX: _ClassVar[FinalText]

class DraftCount(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRAFT_COUNT_UNSPECIFIED: _ClassVar[DraftCount]
    DRAFT_COUNT_ALL_AT_ONCE: _ClassVar[DraftCount]
    DRAFT_COUNT_ADAPTIVE: _ClassVar[DraftCount]
    DRAFT_COUNT_CASCADE: _ClassVar[DraftCount]

class SolveStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOLVE_STATUS_UNSPECIFIED: _ClassVar[SolveStatus]
    SOLVE_STATUS_VERIFIED: _ClassVar[SolveStatus]
    SOLVE_STATUS_UNVERIFIED: _ClassVar[SolveStatus]
    SOLVE_STATUS_FAILED: _ClassVar[SolveStatus]
    SOLVE_STATUS_UNCHECKED: _ClassVar[SolveStatus]
    SOLVE_STATUS_COMPUTATION_CHECKED: _ClassVar[SolveStatus]

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_ACCEPTED: _ClassVar[Outcome]
    OUTCOME_REJECTED: _ClassVar[Outcome]
FINAL_TEXT_UNSPECIFIED: FinalText
FINAL_TEXT_PASS_THROUGH: FinalText
FINAL_TEXT_REFINE: FinalText
FINAL_TEXT_CONSENSUS_PREFIX: FinalText
DRAFT_COUNT_UNSPECIFIED: DraftCount
DRAFT_COUNT_ALL_AT_ONCE: DraftCount
DRAFT_COUNT_ADAPTIVE: DraftCount
DRAFT_COUNT_CASCADE: DraftCount
SOLVE_STATUS_UNSPECIFIED: SolveStatus
SOLVE_STATUS_VERIFIED: SolveStatus
SOLVE_STATUS_UNVERIFIED: SolveStatus
SOLVE_STATUS_FAILED: SolveStatus
SOLVE_STATUS_UNCHECKED: SolveStatus
SOLVE_STATUS_COMPUTATION_CHECKED: SolveStatus
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_ACCEPTED: Outcome
OUTCOME_REJECTED: Outcome

class SolveRequest(_message.Message):
    __slots__ = ("prompt", "output_schema", "constraints", "context", "num_drafts", "sampling", "strategy_hints", "request_id", "refine_sampling", "disable_thinking_trace", "disable_consensus_prefix", "disable_default_arithmetic", "disable_streaming_verification", "disable_quorum", "quorum", "replace_aborted_drafts", "selection_policy", "program_drafts", "draft_count", "confidence_stop", "final_text", "round")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_HINTS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REFINE_SAMPLING_FIELD_NUMBER: _ClassVar[int]
    DISABLE_THINKING_TRACE_FIELD_NUMBER: _ClassVar[int]
    DISABLE_CONSENSUS_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DISABLE_DEFAULT_ARITHMETIC_FIELD_NUMBER: _ClassVar[int]
    DISABLE_STREAMING_VERIFICATION_FIELD_NUMBER: _ClassVar[int]
    DISABLE_QUORUM_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    REPLACE_ABORTED_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    SELECTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    DRAFT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_STOP_FIELD_NUMBER: _ClassVar[int]
    FINAL_TEXT_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    output_schema: str
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    context: _struct_pb2.Struct
    num_drafts: int
    sampling: _common_pb2.SamplingParams
    strategy_hints: _containers.RepeatedScalarFieldContainer[str]
    request_id: str
    refine_sampling: _common_pb2.SamplingParams
    disable_thinking_trace: bool
    disable_consensus_prefix: bool
    disable_default_arithmetic: bool
    disable_streaming_verification: bool
    disable_quorum: bool
    quorum: int
    replace_aborted_drafts: bool
    selection_policy: str
    program_drafts: int
    draft_count: DraftCount
    confidence_stop: bool
    final_text: FinalText
    round: RoundOptions
    def __init__(self, prompt: _Optional[str] = ..., output_schema: _Optional[str] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., num_drafts: _Optional[int] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., strategy_hints: _Optional[_Iterable[str]] = ..., request_id: _Optional[str] = ..., refine_sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., disable_thinking_trace: _Optional[bool] = ..., disable_consensus_prefix: _Optional[bool] = ..., disable_default_arithmetic: _Optional[bool] = ..., disable_streaming_verification: _Optional[bool] = ..., disable_quorum: _Optional[bool] = ..., quorum: _Optional[int] = ..., replace_aborted_drafts: _Optional[bool] = ..., selection_policy: _Optional[str] = ..., program_drafts: _Optional[int] = ..., draft_count: _Optional[_Union[DraftCount, str]] = ..., confidence_stop: _Optional[bool] = ..., final_text: _Optional[_Union[FinalText, str]] = ..., round: _Optional[_Union[RoundOptions, _Mapping]] = ...) -> None: ...

class RoundOptions(_message.Message):
    __slots__ = ("draft_count", "max_drafts", "program_drafts", "quorum", "streaming_verification", "replace_aborted_drafts", "confidence_stop", "default_arithmetic", "selection_policy", "final_text", "consensus_prefix", "thinking_trace")
    DRAFT_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    STREAMING_VERIFICATION_FIELD_NUMBER: _ClassVar[int]
    REPLACE_ABORTED_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_STOP_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ARITHMETIC_FIELD_NUMBER: _ClassVar[int]
    SELECTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    FINAL_TEXT_FIELD_NUMBER: _ClassVar[int]
    CONSENSUS_PREFIX_FIELD_NUMBER: _ClassVar[int]
    THINKING_TRACE_FIELD_NUMBER: _ClassVar[int]
    draft_count: DraftCount
    max_drafts: int
    program_drafts: int
    quorum: int
    streaming_verification: bool
    replace_aborted_drafts: bool
    confidence_stop: bool
    default_arithmetic: bool
    selection_policy: str
    final_text: FinalText
    consensus_prefix: bool
    thinking_trace: bool
    def __init__(self, draft_count: _Optional[_Union[DraftCount, str]] = ..., max_drafts: _Optional[int] = ..., program_drafts: _Optional[int] = ..., quorum: _Optional[int] = ..., streaming_verification: _Optional[bool] = ..., replace_aborted_drafts: _Optional[bool] = ..., confidence_stop: _Optional[bool] = ..., default_arithmetic: _Optional[bool] = ..., selection_policy: _Optional[str] = ..., final_text: _Optional[_Union[FinalText, str]] = ..., consensus_prefix: _Optional[bool] = ..., thinking_trace: _Optional[bool] = ...) -> None: ...

class RoundPlan(_message.Message):
    __slots__ = ("way", "policy", "max_drafts", "max_drafts_reason", "stages", "drafts_started", "stop_reason", "options", "decision")
    WAY_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    MAX_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    MAX_DRAFTS_REASON_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    DRAFTS_STARTED_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    way: str
    policy: str
    max_drafts: int
    max_drafts_reason: str
    stages: int
    drafts_started: int
    stop_reason: str
    options: RoundOptions
    decision: str
    def __init__(self, way: _Optional[str] = ..., policy: _Optional[str] = ..., max_drafts: _Optional[int] = ..., max_drafts_reason: _Optional[str] = ..., stages: _Optional[int] = ..., drafts_started: _Optional[int] = ..., stop_reason: _Optional[str] = ..., options: _Optional[_Union[RoundOptions, _Mapping]] = ..., decision: _Optional[str] = ...) -> None: ...

class ScoreComponents(_message.Message):
    __slots__ = ("score", "agreement", "latency", "answer_share", "final", "alpha", "beta", "gamma", "delta", "signals")
    class SignalsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    SCORE_FIELD_NUMBER: _ClassVar[int]
    AGREEMENT_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SHARE_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    BETA_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    score: float
    agreement: float
    latency: float
    answer_share: float
    final: float
    alpha: float
    beta: float
    gamma: float
    delta: float
    signals: _containers.ScalarMap[str, float]
    def __init__(self, score: _Optional[float] = ..., agreement: _Optional[float] = ..., latency: _Optional[float] = ..., answer_share: _Optional[float] = ..., final: _Optional[float] = ..., alpha: _Optional[float] = ..., beta: _Optional[float] = ..., gamma: _Optional[float] = ..., delta: _Optional[float] = ..., signals: _Optional[_Mapping[str, float]] = ...) -> None: ...

class DraftReport(_message.Message):
    __slots__ = ("draft", "verdict", "selected", "components", "duplicate_of", "round", "aborted", "placement")
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_OF_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    draft: _common_pb2.Draft
    verdict: _common_pb2.DraftVerdict
    selected: bool
    components: ScoreComponents
    duplicate_of: str
    round: int
    aborted: DraftAbort
    placement: DraftPlacement
    def __init__(self, draft: _Optional[_Union[_common_pb2.Draft, _Mapping]] = ..., verdict: _Optional[_Union[_common_pb2.DraftVerdict, _Mapping]] = ..., selected: _Optional[bool] = ..., components: _Optional[_Union[ScoreComponents, _Mapping]] = ..., duplicate_of: _Optional[str] = ..., round: _Optional[int] = ..., aborted: _Optional[_Union[DraftAbort, _Mapping]] = ..., placement: _Optional[_Union[DraftPlacement, _Mapping]] = ...) -> None: ...

class DraftPlacement(_message.Message):
    __slots__ = ("replica", "moved_from", "moved_reason")
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    MOVED_FROM_FIELD_NUMBER: _ClassVar[int]
    MOVED_REASON_FIELD_NUMBER: _ClassVar[int]
    replica: str
    moved_from: str
    moved_reason: str
    def __init__(self, replica: _Optional[str] = ..., moved_from: _Optional[str] = ..., moved_reason: _Optional[str] = ...) -> None: ...

class DraftAbort(_message.Message):
    __slots__ = ("reason", "rule_id", "message", "at", "replaced_by")
    REASON_FIELD_NUMBER: _ClassVar[int]
    RULE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    REPLACED_BY_FIELD_NUMBER: _ClassVar[int]
    reason: str
    rule_id: str
    message: str
    at: _common_pb2.DraftPosition
    replaced_by: str
    def __init__(self, reason: _Optional[str] = ..., rule_id: _Optional[str] = ..., message: _Optional[str] = ..., at: _Optional[_Union[_common_pb2.DraftPosition, _Mapping]] = ..., replaced_by: _Optional[str] = ...) -> None: ...

class EarlyStop(_message.Message):
    __slots__ = ("quorum", "reached", "reason", "aborted", "cancelled", "replacements", "low_confidence")
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    REACHED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    LOW_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    quorum: int
    reached: bool
    reason: str
    aborted: int
    cancelled: int
    replacements: int
    low_confidence: int
    def __init__(self, quorum: _Optional[int] = ..., reached: _Optional[bool] = ..., reason: _Optional[str] = ..., aborted: _Optional[int] = ..., cancelled: _Optional[int] = ..., replacements: _Optional[int] = ..., low_confidence: _Optional[int] = ...) -> None: ...

class StageTimings(_message.Message):
    __slots__ = ("draft", "verify", "select", "refine", "total")
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    SELECT_FIELD_NUMBER: _ClassVar[int]
    REFINE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    draft: _duration_pb2.Duration
    verify: _duration_pb2.Duration
    select: _duration_pb2.Duration
    refine: _duration_pb2.Duration
    total: _duration_pb2.Duration
    def __init__(self, draft: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., verify: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., select: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., refine: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., total: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SolveResponse(_message.Message):
    __slots__ = ("request_id", "answer", "status", "status_reason", "drafts", "selected_draft_ids", "thinking_trace", "trace_id", "timings", "usage", "num_drafts", "num_drafts_reason", "rounds", "consensus_prefix", "refine_token_budget", "refine_budget_reason", "verified_by", "early_stop", "selection_policy", "quality", "reference_plan", "redraft_feedback", "final_text", "round_plan")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    DRAFTS_FIELD_NUMBER: _ClassVar[int]
    SELECTED_DRAFT_IDS_FIELD_NUMBER: _ClassVar[int]
    THINKING_TRACE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFTS_REASON_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    CONSENSUS_PREFIX_FIELD_NUMBER: _ClassVar[int]
    REFINE_TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    REFINE_BUDGET_REASON_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_BY_FIELD_NUMBER: _ClassVar[int]
    EARLY_STOP_FIELD_NUMBER: _ClassVar[int]
    SELECTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_PLAN_FIELD_NUMBER: _ClassVar[int]
    REDRAFT_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    FINAL_TEXT_FIELD_NUMBER: _ClassVar[int]
    ROUND_PLAN_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    answer: str
    status: SolveStatus
    status_reason: str
    drafts: _containers.RepeatedCompositeFieldContainer[DraftReport]
    selected_draft_ids: _containers.RepeatedScalarFieldContainer[str]
    thinking_trace: str
    trace_id: str
    timings: StageTimings
    usage: _common_pb2.TokenUsage
    num_drafts: int
    num_drafts_reason: str
    rounds: int
    consensus_prefix: str
    refine_token_budget: int
    refine_budget_reason: str
    verified_by: _containers.RepeatedScalarFieldContainer[str]
    early_stop: EarlyStop
    selection_policy: str
    quality: _common_pb2.PlanQuality
    reference_plan: _common_pb2.ReferencePlan
    redraft_feedback: _containers.RepeatedScalarFieldContainer[str]
    final_text: FinalText
    round_plan: RoundPlan
    def __init__(self, request_id: _Optional[str] = ..., answer: _Optional[str] = ..., status: _Optional[_Union[SolveStatus, str]] = ..., status_reason: _Optional[str] = ..., drafts: _Optional[_Iterable[_Union[DraftReport, _Mapping]]] = ..., selected_draft_ids: _Optional[_Iterable[str]] = ..., thinking_trace: _Optional[str] = ..., trace_id: _Optional[str] = ..., timings: _Optional[_Union[StageTimings, _Mapping]] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., num_drafts: _Optional[int] = ..., num_drafts_reason: _Optional[str] = ..., rounds: _Optional[int] = ..., consensus_prefix: _Optional[str] = ..., refine_token_budget: _Optional[int] = ..., refine_budget_reason: _Optional[str] = ..., verified_by: _Optional[_Iterable[str]] = ..., early_stop: _Optional[_Union[EarlyStop, _Mapping]] = ..., selection_policy: _Optional[str] = ..., quality: _Optional[_Union[_common_pb2.PlanQuality, _Mapping]] = ..., reference_plan: _Optional[_Union[_common_pb2.ReferencePlan, _Mapping]] = ..., redraft_feedback: _Optional[_Iterable[str]] = ..., final_text: _Optional[_Union[FinalText, str]] = ..., round_plan: _Optional[_Union[RoundPlan, _Mapping]] = ...) -> None: ...

class SubmitFeedbackRequest(_message.Message):
    __slots__ = ("request_id", "outcome")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    outcome: Outcome
    def __init__(self, request_id: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ...) -> None: ...

class SubmitFeedbackResponse(_message.Message):
    __slots__ = ("outcomes_until_refit",)
    OUTCOMES_UNTIL_REFIT_FIELD_NUMBER: _ClassVar[int]
    outcomes_until_refit: int
    def __init__(self, outcomes_until_refit: _Optional[int] = ...) -> None: ...

class GetStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SelectionWeights(_message.Message):
    __slots__ = ("alpha", "beta", "gamma", "delta", "weights")
    class WeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    BETA_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    alpha: float
    beta: float
    gamma: float
    delta: float
    weights: _containers.ScalarMap[str, float]
    def __init__(self, alpha: _Optional[float] = ..., beta: _Optional[float] = ..., gamma: _Optional[float] = ..., delta: _Optional[float] = ..., weights: _Optional[_Mapping[str, float]] = ...) -> None: ...

class VerifierHealth(_message.Message):
    __slots__ = ("healthy", "consecutive_failures", "restarts", "last_restart_time", "restarter", "watchdog_role")
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    LAST_RESTART_TIME_FIELD_NUMBER: _ClassVar[int]
    RESTARTER_FIELD_NUMBER: _ClassVar[int]
    WATCHDOG_ROLE_FIELD_NUMBER: _ClassVar[int]
    healthy: bool
    consecutive_failures: int
    restarts: int
    last_restart_time: _timestamp_pb2.Timestamp
    restarter: str
    watchdog_role: str
    def __init__(self, healthy: _Optional[bool] = ..., consecutive_failures: _Optional[int] = ..., restarts: _Optional[int] = ..., last_restart_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., restarter: _Optional[str] = ..., watchdog_role: _Optional[str] = ...) -> None: ...

class FeedbackCounts(_message.Message):
    __slots__ = ("submitted", "accepted", "rejected", "unknown_request", "refits", "pending_decisions")
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_REQUEST_FIELD_NUMBER: _ClassVar[int]
    REFITS_FIELD_NUMBER: _ClassVar[int]
    PENDING_DECISIONS_FIELD_NUMBER: _ClassVar[int]
    submitted: int
    accepted: int
    rejected: int
    unknown_request: int
    refits: int
    pending_decisions: int
    def __init__(self, submitted: _Optional[int] = ..., accepted: _Optional[int] = ..., rejected: _Optional[int] = ..., unknown_request: _Optional[int] = ..., refits: _Optional[int] = ..., pending_decisions: _Optional[int] = ...) -> None: ...

class GetStateResponse(_message.Message):
    __slots__ = ("weights", "num_drafts", "num_drafts_reason", "fast_mode", "utilization", "utilization_source", "verifier", "feedback", "selection_policy")
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFTS_REASON_FIELD_NUMBER: _ClassVar[int]
    FAST_MODE_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_SOURCE_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    SELECTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    weights: SelectionWeights
    num_drafts: int
    num_drafts_reason: str
    fast_mode: bool
    utilization: float
    utilization_source: str
    verifier: VerifierHealth
    feedback: FeedbackCounts
    selection_policy: str
    def __init__(self, weights: _Optional[_Union[SelectionWeights, _Mapping]] = ..., num_drafts: _Optional[int] = ..., num_drafts_reason: _Optional[str] = ..., fast_mode: _Optional[bool] = ..., utilization: _Optional[float] = ..., utilization_source: _Optional[str] = ..., verifier: _Optional[_Union[VerifierHealth, _Mapping]] = ..., feedback: _Optional[_Union[FeedbackCounts, _Mapping]] = ..., selection_policy: _Optional[str] = ...) -> None: ...

class SolveStreamRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: SolveRequest
    def __init__(self, request: _Optional[_Union[SolveRequest, _Mapping]] = ...) -> None: ...

class SolveStreamResponse(_message.Message):
    __slots__ = ("draft_generated", "draft_verified", "draft_selected", "draft_discarded", "refine_chunk", "final", "round_started", "consensus_prefix", "thinking_trace")
    DRAFT_GENERATED_FIELD_NUMBER: _ClassVar[int]
    DRAFT_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    DRAFT_SELECTED_FIELD_NUMBER: _ClassVar[int]
    DRAFT_DISCARDED_FIELD_NUMBER: _ClassVar[int]
    REFINE_CHUNK_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    ROUND_STARTED_FIELD_NUMBER: _ClassVar[int]
    CONSENSUS_PREFIX_FIELD_NUMBER: _ClassVar[int]
    THINKING_TRACE_FIELD_NUMBER: _ClassVar[int]
    draft_generated: DraftGenerated
    draft_verified: DraftVerified
    draft_selected: DraftSelected
    draft_discarded: DraftDiscarded
    refine_chunk: RefineChunk
    final: SolveResponse
    round_started: RoundStarted
    consensus_prefix: ConsensusPrefix
    thinking_trace: ThinkingTrace
    def __init__(self, draft_generated: _Optional[_Union[DraftGenerated, _Mapping]] = ..., draft_verified: _Optional[_Union[DraftVerified, _Mapping]] = ..., draft_selected: _Optional[_Union[DraftSelected, _Mapping]] = ..., draft_discarded: _Optional[_Union[DraftDiscarded, _Mapping]] = ..., refine_chunk: _Optional[_Union[RefineChunk, _Mapping]] = ..., final: _Optional[_Union[SolveResponse, _Mapping]] = ..., round_started: _Optional[_Union[RoundStarted, _Mapping]] = ..., consensus_prefix: _Optional[_Union[ConsensusPrefix, _Mapping]] = ..., thinking_trace: _Optional[_Union[ThinkingTrace, _Mapping]] = ...) -> None: ...

class ConsensusPrefix(_message.Message):
    __slots__ = ("text", "source_draft_id", "supporting_draft_ids", "basis", "lines", "computations")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_DRAFT_ID_FIELD_NUMBER: _ClassVar[int]
    SUPPORTING_DRAFT_IDS_FIELD_NUMBER: _ClassVar[int]
    BASIS_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    COMPUTATIONS_FIELD_NUMBER: _ClassVar[int]
    text: str
    source_draft_id: str
    supporting_draft_ids: _containers.RepeatedScalarFieldContainer[str]
    basis: str
    lines: int
    computations: int
    def __init__(self, text: _Optional[str] = ..., source_draft_id: _Optional[str] = ..., supporting_draft_ids: _Optional[_Iterable[str]] = ..., basis: _Optional[str] = ..., lines: _Optional[int] = ..., computations: _Optional[int] = ...) -> None: ...

class RoundStarted(_message.Message):
    __slots__ = ("round", "num_drafts", "reason", "feedback")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    round: int
    num_drafts: int
    reason: str
    feedback: str
    def __init__(self, round: _Optional[int] = ..., num_drafts: _Optional[int] = ..., reason: _Optional[str] = ..., feedback: _Optional[str] = ...) -> None: ...

class DraftGenerated(_message.Message):
    __slots__ = ("draft",)
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    draft: _common_pb2.Draft
    def __init__(self, draft: _Optional[_Union[_common_pb2.Draft, _Mapping]] = ...) -> None: ...

class DraftVerified(_message.Message):
    __slots__ = ("verdict",)
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    verdict: _common_pb2.DraftVerdict
    def __init__(self, verdict: _Optional[_Union[_common_pb2.DraftVerdict, _Mapping]] = ...) -> None: ...

class DraftSelected(_message.Message):
    __slots__ = ("draft_id", "rank", "score")
    DRAFT_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    draft_id: str
    rank: int
    score: float
    def __init__(self, draft_id: _Optional[str] = ..., rank: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class DraftDiscarded(_message.Message):
    __slots__ = ("draft_id", "reason")
    DRAFT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    draft_id: str
    reason: str
    def __init__(self, draft_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RefineChunk(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ThinkingTrace(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...
