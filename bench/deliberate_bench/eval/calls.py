"""One evaluated problem, call by call: the single pass, the Scheduler's Solve (both ways with --early-stop both),
the Refiner on subsets and on the other model; each call's record as the runs file keeps it (docs/eval.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from deliberate.core.admission import retry_after_ms
from deliberate.verifier.parsing import extract_final_answer
from deliberate.verifier.program import check_program
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.eval.outcomes import STAGES
from deliberate_bench.eval.problems import Problem
from deliberate_bench.eval.replay import replay
from deliberate_bench.eval.services import Services, error_text
from deliberate_client.client import build_request

# With --judges: the Scheduler waits this much longer for a verdict than the judge may take.
JUDGE_VERIFY_MARGIN_S = 5.0


def seconds(duration) -> float:
    return duration.ToTimedelta().total_seconds()


def finish_name(reason: int) -> str:
    return common_pb2.FinishReason.Name(reason).removeprefix("FINISH_REASON_")


def components_dict(components: pb.ScoreComponents) -> dict:
    """Every field of ScoreComponents, new ones included (the signals map as a JSON object)."""
    return {
        f.name: dict(getattr(components, f.name)) if f.message_type else getattr(components, f.name)
        for f in components.DESCRIPTOR.fields
    }


def strip_trace(text: str, trace: str) -> str:
    return text.removeprefix(trace).strip() if trace else text.strip()


@dataclass
class Settings:
    sizes: list[int]
    max_new_tokens: int | None
    refine_max_new_tokens: int | None
    temperature: float | None
    seed: int
    check_arithmetic: bool
    refine_subsets: bool
    ads_catalog_size: int
    timeout_s: float
    engine: str
    model: str
    # The Verifier's judge (--judges): "off", an engine with judge_model, or a trained judge's directory.
    judge: str = "off"
    judge_model: str = ""
    judge_timeout_s: float = 0.0
    # --early-stop: "on" (the Scheduler's defaults), "off" (streaming verification and quorum switched off per
    # request) or "both" (each problem solved both ways).
    early_stop: str = "on"
    # The Refiner's model, when it is not `model` (the Drafter's).
    refiner_model: str = ""
    # --cross-refiner-model: a second Refiner on this model refines the same selected drafts (mixed deployments).
    cross_refiner_model: str = ""
    # --cross-drafter-model: a second Drafter on this model makes its own greedy single passes.
    cross_drafter_model: str = ""
    # --complete-round N: the pipeline row is the Scheduler's default round (the cascade: no num_drafts), and a round
    # of N drafts all at once, every draft to its end, is recorded beside it (`round_complete`).
    complete_round: int = 0

    @property
    def largest(self) -> int:
        return max(self.sizes)

    def fingerprint(self) -> dict:
        """What must match for records of two runs to be pooled."""
        return (
            {
                "sizes": sorted(self.sizes),
                "max_new_tokens": self.max_new_tokens,
                "refine_max_new_tokens": self.refine_max_new_tokens,
                "temperature": self.temperature,
                "seed": self.seed,
                "check_arithmetic": self.check_arithmetic,
                "ads_catalog_size": self.ads_catalog_size,
                "engine": self.engine,
                "model": self.model,
            }
            | self.judge_fingerprint()
            | self.early_stop_fingerprint()
            | {
                name: value
                for name, value in (
                    ("refiner_model", self.refiner_model if self.refiner_model != self.model else ""),
                    ("cross_refiner_model", self.cross_refiner_model),
                    ("cross_drafter_model", self.cross_drafter_model),
                    ("complete_round", self.complete_round),
                )
                if value
            }
        )

    def early_stop_fingerprint(self) -> dict:
        """Present only when not "on", so runs files made before --early-stop stay readable."""
        return {} if self.early_stop == "on" else {"early_stop": self.early_stop}

    def judge_fingerprint(self) -> dict:
        """Present only with --judges, so runs files made before it stay readable."""
        if self.judge == "off" and not self.judge_timeout_s:
            return {}
        return {"judge": self.judge, "judge_model": self.judge_model, "judge_timeout_s": self.judge_timeout_s}

    def judge_env(self) -> dict[str, str]:
        """What the stack's services read to run this judge: the Verifier's judge, and the Scheduler's
        per-draft verification deadline raised above the judge's own (else every judged verdict is late)."""
        if not self.judge_fingerprint():
            return {}
        return {
            "DELIBERATE_JUDGE": self.judge,
            "DELIBERATE_JUDGE_MODEL": self.judge_model,
            "DELIBERATE_JUDGE_TIMEOUT_S": str(self.judge_timeout_s),
            "DELIBERATE_VERIFY_TIMEOUT_S": str(self.judge_timeout_s + JUDGE_VERIFY_MARGIN_S),
        }


def single_pass(
    services: Services,
    s: Settings,
    request_id: str,
    prompt: str,
    output_schema: str = "",
    program: bool = False,
    drafter: drafter_service_pb2_grpc.DrafterServiceStub | None = None,
) -> dict:
    """One greedy draft from the Drafter, no verification; with `program`, one greedy program draft whose answer
    is what its program prints, run in the Verifier's sandbox here (no other check)."""
    sampling = common_pb2.SamplingParams(temperature=0.0)
    if s.max_new_tokens is not None:
        sampling.max_new_tokens = s.max_new_tokens
    request = drafter_service_pb2.GenerateDraftsRequest(
        request_id=request_id,
        prompt=prompt,
        num_drafts=1,
        program_drafts=int(program),
        sampling=sampling,
        output_schema=output_schema,
    )
    started = time.perf_counter()
    try:
        calls = (drafter or services.drafter).GenerateDrafts(request, timeout=s.timeout_s)
        drafts = [m.draft for m in calls]
    except grpc.RpcError as error:
        hint = retry_after_ms(error.trailing_metadata()) if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else None
        return {"error": error_text(error), "answer": None, "latency_s": time.perf_counter() - started,
                **({"retry_after_ms": hint} if hint is not None else {})}  # fmt: skip
    latency = time.perf_counter() - started
    draft = drafts[0]
    return {
        "text": draft.text,
        "answer": program_answer(draft.text) if program else extract_final_answer(draft.text),
        "finish_reason": finish_name(draft.finish_reason),
        "prompt_tokens": draft.usage.prompt_tokens,
        "completion_tokens": draft.usage.completion_tokens,
        "latency_s": round(latency, 3),
        **confidence_of(draft),
    }


def program_answer(text: str) -> str | None:
    """The number a program draft's program prints last, None when it has none or fails."""
    ran = check_program(text)
    return ran.answer if ran is not None and ran.passed else None


def confidence_of(draft: common_pb2.Draft) -> dict:
    """The draft's token confidence with its per-token series (for replaying early stopping), when it has one."""
    if not draft.HasField("confidence"):
        return {}
    c = draft.confidence
    numbers = {
        "tokens": c.tokens,
        "mean_logprob": round(c.mean_logprob, 5),
        "min_window": round(c.min_window, 5),
        "last_window": round(c.last_window, 5),
        "answer": round(c.answer, 5) if c.HasField("answer") else None,
        "window_tokens": c.window_tokens,
        "top_k": c.top_k,
    }
    series = {
        "token_logprobs": [round(x, 4) for x in c.token_logprobs],
        "token_confidences": [round(x, 4) for x in c.token_confidences],
        "token_ends": list(c.token_ends),
    }
    return {"confidence": numbers | series}


def judge_of(verdict: common_pb2.DraftVerdict) -> dict:
    """The judge's verdict on a draft, when a judge ran on it."""
    if not verdict.HasField("judge"):
        return {}
    j = verdict.judge
    return {"judge": {"valid": j.valid, "score": round(j.score, 4), "error": j.error, "latency_s": seconds(j.latency)}}


def solve(services: Services, s: Settings, request: pb.SolveRequest) -> tuple[dict, pb.SolveResponse | None]:
    """One Scheduler Solve with N = the largest size; every draft report kept."""
    started = time.perf_counter()
    try:
        response = services.scheduler.Solve(request, timeout=s.timeout_s)
    except grpc.RpcError as error:
        return {"error": error_text(error), "answer": None, "latency_s": time.perf_counter() - started}, None
    latency = time.perf_counter() - started
    answer_text = strip_trace(response.answer, response.thinking_trace)
    draft_tokens = sum(r.draft.usage.completion_tokens for r in response.drafts)
    drafts = [
        {
            "round": r.round,
            "index": r.draft.index,
            "kind": r.draft.kind or "prose",
            "text": r.draft.text,
            "answer": r.verdict.extracted_answer or None,
            "valid": r.verdict.valid,
            "score": r.verdict.score,
            "finish_reason": finish_name(r.draft.finish_reason),
            "prompt_tokens": r.draft.usage.prompt_tokens,
            "completion_tokens": r.draft.usage.completion_tokens,
            "generation_latency_s": round(seconds(r.draft.generation_latency), 3),
            "verify_latency_s": round(seconds(r.verdict.latency), 4),
            **confidence_of(r.draft),
            "components": components_dict(r.components),
            "selected": r.selected,
            "duplicate_of": r.duplicate_of,
            "evidence": list(r.verdict.evidence),
            "failed_rules": [
                {"rule_id": x.rule_id, "hard": x.hard, "message": x.message}
                for x in r.verdict.rule_results
                if not x.passed
            ],
            **judge_of(r.verdict),
        }
        for r in response.drafts
    ]
    record = {
        "answer_text": answer_text,
        "answer": extract_final_answer(answer_text),
        "status": pb.SolveStatus.Name(response.status).removeprefix("SOLVE_STATUS_"),
        "status_reason": response.status_reason,
        "latency_s": round(latency, 3),
        "prompt_tokens": response.usage.prompt_tokens,
        "completion_tokens": response.usage.completion_tokens,
        "refine_tokens": response.usage.completion_tokens - draft_tokens,
        "refine_token_budget": response.refine_token_budget,
        "rounds": response.rounds,
        "num_drafts": response.num_drafts,
        "selection_policy": response.selection_policy,
        "round_plan": {
            "way": response.round_plan.way,
            "policy": response.round_plan.policy,
            "max_drafts": response.round_plan.max_drafts,
            "stages": response.round_plan.stages,
            "drafts_started": response.round_plan.drafts_started,
            "stop_reason": response.round_plan.stop_reason,
        },
        "timings": {k: round(seconds(getattr(response.timings, k)), 3) for k in STAGES},
        "drafts": drafts,
    }
    return record, response


def refine_subset(
    refiner: refiner_service_pb2_grpc.RefinerServiceStub,
    s: Settings,
    request: pb.SolveRequest,
    response: pb.SolveResponse,
    record: dict,
    n: int,
) -> dict:
    """pipeline@n: the Scheduler's ranking (its weights, read from the Solve) on the first n drafts of round 0, the
    best 2 sent to `refiner` with those n drafts — no re-draft round and no re-check of the refined answer (see
    docs/eval.md). For n below the largest size with the stack's Refiner; with the other model's Refiner
    (--cross-refiner-model) for n = the largest."""
    first = [d for d in record["drafts"] if d["round"] == 0 and d["index"] < n]
    if not first:
        return {"error": "no drafts", "answer": None}
    selection = replay(first, policy=request.selection_policy or "weighted")
    chosen = selection.selected
    reports = {(r.round, r.draft.index): r for r in response.drafts}
    selected = [reports[(0, c.index)] for c in chosen]
    call = refiner_service_pb2.RefineRequest(
        request_id=f"{request.request_id}-refine{n}",
        prompt=request.prompt,
        selected=[refiner_service_pb2.VerifiedDraft(draft=r.draft, verdict=r.verdict) for r in selected],
        all_drafts=[reports[(0, d["index"])].draft for d in first],
        sampling=request.refine_sampling,
        output_schema=request.output_schema,
    )
    started = time.perf_counter()
    try:
        final = None
        for event in refiner.Refine(call, timeout=s.timeout_s):
            if event.WhichOneof("event") == "final":
                final = event.final
    except grpc.RpcError as error:
        return {"error": error_text(error), "answer": None}
    refine_s = time.perf_counter() - started
    if final is None:
        return {"error": "the refiner sent no final message", "answer": None}
    drafting_s = max(d["generation_latency_s"] + d["verify_latency_s"] for d in first)
    answer_text = strip_trace(final.text, final.thinking_trace)
    return {
        "answer_text": answer_text,
        "answer": extract_final_answer(answer_text),
        "status": selection.status.upper(),
        "selected_indices": [c.index for c in chosen],
        "latency_s": round(drafting_s + refine_s, 3),
        "refine_latency_s": round(refine_s, 3),
        "completion_tokens": sum(d["completion_tokens"] for d in first) + final.usage.completion_tokens,
        "refine_tokens": final.usage.completion_tokens,
        "refine_token_budget": final.token_budget,
        "finish_reason": finish_name(final.finish_reason),
    }


def gsm8k_request(problem: Problem, s: Settings) -> pb.SolveRequest:
    """The question alone: the Scheduler adds its default arithmetic pack (unless --no-check-arithmetic). With
    --complete-round the Scheduler's default round (the cascade) decides how many drafts; otherwise the pipeline@N
    rows read a round of the largest N drafts started all at once, as they always have."""
    request = build_request(
        problem.question,
        num_drafts=0 if s.complete_round else s.largest,
        max_new_tokens=s.max_new_tokens,
        refine_max_new_tokens=s.refine_max_new_tokens,
        temperature=s.temperature,
        seed=s.seed,
        request_id=f"eval-{problem.id}",
        draft_count="" if s.complete_round else "all_at_once",
    )
    request.disable_default_arithmetic = not s.check_arithmetic
    return request


def complete_round_request(request: pb.SolveRequest, n: int) -> pb.SolveRequest:
    """The same question as a round of `n` drafts started all at once (the Scheduler's default mix of programs),
    each generated to its end and verified whole: the drafts a plain vote and pass@n are read from."""
    copy = without_early_stop(request)
    copy.request_id = f"{request.request_id}-complete-{n}"
    copy.num_drafts, copy.draft_count = n, pb.DRAFT_COUNT_ALL_AT_ONCE
    return copy


def without_early_stop(request: pb.SolveRequest) -> pb.SolveRequest:
    """The same request with streaming verification (and with it the abort of failed drafts), the quorum and the
    confidence stop switched off: every draft is generated to its end and verified whole."""
    copy = pb.SolveRequest()
    copy.CopyFrom(request)
    copy.request_id = f"{request.request_id}-without-early-stop"
    copy.disable_streaming_verification = copy.disable_quorum = True
    copy.confidence_stop = False
    return copy


def early_stop_of(response: pb.SolveResponse | None) -> dict:
    """What early stopping did in one Solve."""
    if response is None:
        return {}
    e = response.early_stop
    return {"early_stop": {"aborted": e.aborted, "cancelled": e.cancelled, "reached": e.reached, "reason": e.reason}}


def solve_both_ways(
    services: Services, s: Settings, request: pb.SolveRequest
) -> tuple[dict, pb.SolveResponse | None, dict | None]:
    """The Solve as --early-stop asks: its record and response, and with "both" the record of the same request
    without early stopping (its draft texts dropped: the comparison needs the answer, latency and tokens).
    With "both" the request id decides which goes first (about half each way, the same on a rerun), so neither
    side always meets a warm prompt cache or a busier machine."""
    if s.early_stop == "off":
        request = without_early_stop(request)
    if s.early_stop != "both":
        solved, response = solve(services, s, request)
        return solved | early_stop_of(response), response, None
    without_first = sum(map(ord, request.request_id)) % 2 == 1
    if without_first:
        other, _ = solve(services, s, without_early_stop(request))
    solved, response = solve(services, s, request)
    if not without_first:
        other, _ = solve(services, s, without_early_stop(request))
    other.pop("drafts", None)
    return solved | early_stop_of(response), response, other


def run_problem(services: Services, s: Settings, problem: Problem) -> dict:
    single = single_pass(services, s, f"eval-{problem.id}-single", problem.question)
    single_program = single_pass(services, s, f"eval-{problem.id}-single-program", problem.question, program=True)
    request = gsm8k_request(problem, s)
    solved, response, without = solve_both_ways(services, s, request)
    complete = {}
    if s.complete_round:
        complete = {"round_complete": solve(services, s, complete_round_request(request, s.complete_round))[0]}
    subsets = {}
    if s.refine_subsets and response is not None:
        for n in sorted(s.sizes):
            if n < s.largest:
                subsets[str(n)] = refine_subset(services.refiner, s, request, response, solved, n)
    cross = {}
    if services.cross_refiner is not None and response is not None:
        cross = {"cross_refine": refine_subset(services.cross_refiner, s, request, response, solved, s.largest)}
    if services.cross_drafter is not None:
        cross |= {
            f"cross_{name}": single_pass(
                services,
                s,
                f"eval-{problem.id}-cross-{name}",
                problem.question,
                program=program,
                drafter=services.cross_drafter,
            )  # fmt: skip
            for name, program in (("single", False), ("single_program", True))
        }
    return (
        {
            "task": "gsm8k",
            "id": problem.id,
            "line": problem.line,
            "question": problem.question,
            "gold": problem.gold,
            "single": single,
            "single_program": single_program,
            "solve": solved,
            "subsets": subsets,
        }
        | cross
        | complete
        | ({} if without is None else {"solve_without_early_stop": without})
    )
