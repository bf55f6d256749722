"""`deliberate eval`: does staged reasoning answer better than one pass? Measured on the real services.

Per GSM8K problem, two calls give every configuration, all on the same problems (paired):

* one greedy draft (temperature 0) straight from the Drafter — the single pass, no verification;
* one Scheduler `Solve` with N = the largest size — its draft reports (verdict, extracted answer, score
  components) give majority@n, best_of@n and the selection ablation for every n ≤ N offline, and its final
  answer is pipeline@N;
* for each smaller n, one Refiner call on the Scheduler's selection rule applied to the first n drafts
  (pipeline@n; `--no-refine-subsets` skips it);
* with `--early-stop both`, a second Solve of the same request with streaming verification and the quorum
  switched off, so the pipeline is reported both ways on the same problems in one run.

Each finished problem is appended to `<name>.runs.jsonl` at once, so a rerun resumes where it stopped; the
summary (`<name>.json`, `.md`, `.png`) is always rebuilt from that file (`--summarize-only` does only that).
Method and fields: docs/eval.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from deliberate.cli.stack import Ports, Stack
from deliberate.selection import same_answer
from deliberate.selection.answers import parse_gold
from deliberate.verifier.parsing import extract_final_answer, extract_json
from deliberate.verifier.program import check_program
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.scheduler.v1 import scheduler_service_pb2_grpc
from deliberate_bench import eval_summary
from deliberate_bench.eval_summary import read_runs
from deliberate_bench.replay import replay
from deliberate_client.cli import SERVER_COMMANDS
from deliberate_client.client import build_request

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = ROOT.parent / "shared/data/gsm8k/train.jsonl"
DEFAULT_EXCLUDE = ROOT / "bench/eval/tuning_problems.txt"
RESULTS = ROOT / "bench/results"
DEFAULT_SEED = 2026
SCHEDULER_SERVICES = ("drafter", "verifier", "refiner", "scheduler")
# With --judges: the Scheduler waits this much longer for a verdict than the judge may take.
JUDGE_VERIFY_MARGIN_S = 5.0


# --------------------------------------------------------------------------------------------------
# Problems
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    id: str  # "<file stem>:<0-based line>", stable across runs
    line: int
    question: str
    gold: str  # the number after "####", as written


def read_exclusions(path: Path | None) -> set[int]:
    """0-based line numbers, one per line or as ranges `a-b` (inclusive); `#` starts a comment."""
    if path is None or not path.exists():
        return set()
    excluded: set[int] = set()
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "-" in line:
            low, high = (int(part) for part in line.split("-", 1))
            excluded.update(range(low, high + 1))
        else:
            excluded.add(int(line))
    return excluded


def load_problems(path: Path, limit: int, seed: int, exclude: set[int]) -> list[Problem]:
    """A fixed random sample: the non-excluded lines shuffled with `seed`, the first `limit` taken — so a
    larger limit extends a smaller one's sample instead of redrawing it."""
    with path.open() as lines:
        rows = [(i, json.loads(line)) for i, line in enumerate(lines) if line.strip()]
    candidates = [(i, row) for i, row in rows if i not in exclude]
    random.Random(seed).shuffle(candidates)
    problems = []
    for i, row in candidates[:limit]:
        gold = row["answer"].rsplit("####", 1)[-1].strip()
        parse_gold(row["answer"])  # refuse a malformed gold answer before spending model time on it
        problems.append(Problem(f"{path.stem}:{i}", i, row["question"], gold))
    return problems


# --------------------------------------------------------------------------------------------------
# The runs file
# --------------------------------------------------------------------------------------------------


def append_run(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(record) + "\n")
        out.flush()
        os.fsync(out.fileno())


# --------------------------------------------------------------------------------------------------
# Calling the services
# --------------------------------------------------------------------------------------------------


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
    # --cross-refiner-model: a second Refiner on this model refines the same selected drafts (mixed deployments).
    cross_refiner_model: str = ""

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
            | ({"cross_refiner_model": self.cross_refiner_model} if self.cross_refiner_model else {})
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


class Services:
    """Stubs of the Scheduler, Drafter and Refiner, and of a Refiner on the other model (--cross-refiner-model)."""

    def __init__(self, scheduler: str, drafter: str, refiner: str, cross_refiner: str | None = None):
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        addresses = [scheduler, drafter, refiner] + ([cross_refiner] if cross_refiner else [])
        self.channels = [grpc.insecure_channel(a, options=options) for a in addresses]
        self.scheduler = scheduler_service_pb2_grpc.SchedulerServiceStub(self.channels[0])
        self.drafter = drafter_service_pb2_grpc.DrafterServiceStub(self.channels[1])
        self.refiner = refiner_service_pb2_grpc.RefinerServiceStub(self.channels[2])
        self.cross_refiner = refiner_service_pb2_grpc.RefinerServiceStub(self.channels[3]) if cross_refiner else None

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


def error_text(error: grpc.RpcError) -> str:
    return f"{error.code().name}: {error.details()}"


def single_pass(
    services: Services, s: Settings, request_id: str, prompt: str, output_schema: str = "", program: bool = False
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
        drafts = [m.draft for m in services.drafter.GenerateDrafts(request, timeout=s.timeout_s)]
    except grpc.RpcError as error:
        return {"error": error_text(error), "answer": None, "latency_s": time.perf_counter() - started}
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
        "timings": {k: round(seconds(getattr(response.timings, k)), 3) for k in eval_summary.STAGES},
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
    """The question alone: the Scheduler adds its default arithmetic pack (unless --no-check-arithmetic)."""
    request = build_request(
        problem.question,
        num_drafts=s.largest,
        max_new_tokens=s.max_new_tokens,
        refine_max_new_tokens=s.refine_max_new_tokens,
        temperature=s.temperature,
        seed=s.seed,
        request_id=f"eval-{problem.id}",
    )
    request.disable_default_arithmetic = not s.check_arithmetic
    return request


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
    subsets = {}
    if s.refine_subsets and response is not None:
        for n in sorted(s.sizes):
            if n < s.largest:
                subsets[str(n)] = refine_subset(services.refiner, s, request, response, solved, n)
    cross = {}
    if services.cross_refiner is not None and response is not None:
        cross = {"cross_refine": refine_subset(services.cross_refiner, s, request, response, solved, s.largest)}
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
        | ({} if without is None else {"solve_without_early_stop": without})
    )


# --------------------------------------------------------------------------------------------------
# Ad selection
# --------------------------------------------------------------------------------------------------


def ad_instance(seed: int, size: int = 100):
    from deliberate_client.examples import ads

    catalog = ads.generate_catalog(seed, size)
    constraints = [dict(c) for c in ads.CONSTRAINTS]
    for c in constraints:
        if c.get("rulePack") == "ad_selection":  # the Verifier must check this catalog, not the shipped one
            c["params"] = {"budget": ads.BUDGET, "catalog": [ad.to_dict() for ad in catalog]}
    return catalog, ads.prompt(catalog), json.dumps(ads.OUTPUT_SCHEMA), constraints, ads.context(catalog)


def check_ad_plan(text: str | None, catalog, budget: float | None = None, picks: int | None = None) -> tuple[bool, str]:
    """Does the answer satisfy every constraint of the ad task? Checked here from the catalog, independently of
    the Verifier: JSON with `selected_ids`, exactly `picks` distinct ids, all in the catalog, total cost within
    budget, no two ads of one category."""
    from deliberate_client.examples import ads

    budget = ads.BUDGET if budget is None else budget
    picks = ads.PICKS if picks is None else picks
    value, error = extract_json(text or "")
    if error is not None or not isinstance(value, dict):
        return False, f"no JSON object: {error or type(value).__name__}"
    ids = value.get("selected_ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return False, "selected_ids is not a list of integers"
    if len(ids) != picks or len(set(ids)) != picks:
        return False, f"{len(set(ids))} distinct ids of {len(ids)}, need {picks}"
    by_id = {ad.id: ad for ad in catalog}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        return False, f"ids not in the catalog: {unknown}"
    total = sum(by_id[i].cost for i in ids)
    if total > budget:
        return False, f"cost {total} > {budget:g}"
    categories = [by_id[i].category for i in ids]
    if len(set(categories)) != len(categories):
        return False, "two ads of one category"
    return True, f"cost {total}, ctr {sum(by_id[i].ctr for i in ids):.4f}"


def run_ads(services: Services, s: Settings, seed: int, size: int) -> dict:
    catalog, prompt, schema, constraints, context = ad_instance(seed, size)
    single = single_pass(services, s, f"eval-ads-{seed}-single", prompt, schema)
    request = build_request(
        prompt,
        num_drafts=s.largest,
        max_new_tokens=s.max_new_tokens,
        refine_max_new_tokens=s.refine_max_new_tokens,
        temperature=s.temperature,
        seed=s.seed,
        output_schema=schema,
        context=context,
        constraints=constraints,
        request_id=f"eval-ads-{seed}",
    )
    solved, _, without = solve_both_ways(services, s, request)
    parts = [single, solved] + ([] if without is None else [without])
    for part in parts:
        part["satisfied"], part["check"] = check_ad_plan(part.get("text", part.get("answer_text")), catalog)
    solved.pop("drafts", None)  # the plans are in answer_text; draft texts would only bloat the file
    return {
        "task": "ads",
        "id": f"ads:{seed}",
        "catalog_seed": seed,
        "catalog_size": size,
        "single": single,
        "solve": solved,
    } | ({} if without is None else {"solve_without_early_stop": without})


# --------------------------------------------------------------------------------------------------
# Memory, progress
# --------------------------------------------------------------------------------------------------


def vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def peak_rss(stack: Stack | None) -> dict[str, float] | None:
    """Peak resident memory (VmHWM) of each service process this eval started; the Verifier is the
    Scheduler's child. None when the services were started elsewhere (`--address`)."""
    if stack is None:
        return None
    peaks = {}
    for service, process in stack.processes.items():
        peak = vm_hwm_mb(process.pid)
        if peak is not None:
            peaks[service] = peak
        if service == "scheduler":
            for child in children(process.pid):
                peak = vm_hwm_mb(child)
                if peak is not None:
                    peaks["verifier"] = max(peaks.get("verifier", 0.0), peak)
    return peaks


class Progress:
    """tqdm on stderr when it is installed, else one line rewritten in place with a count and an ETA."""

    def __init__(self, total: int, done: int):
        self.total, self.done, self.started, self.start_done = total, done, time.monotonic(), done
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="problem", file=sys.stderr, dynamic_ncols=True)
        except ImportError:
            self.bar = None
        self.show("")

    def update(self, note: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(1)
        else:
            self.show(note)

    def show(self, note: str) -> None:
        if self.bar is not None:
            return
        elapsed = time.monotonic() - self.started
        made = self.done - self.start_done
        eta = f"{(self.total - self.done) * elapsed / made / 60:.0f} min" if made else "?"
        line = f"\reval {self.done}/{self.total}  elapsed {elapsed / 60:.1f} min  ETA {eta}  {note}"
        print(line, end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            print(file=sys.stderr)


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def add_command(commands: argparse._SubParsersAction) -> None:
    """Registered in the entry-point group `deliberate.commands` (pyproject.toml)."""
    evaluate = commands.add_parser("eval", help=SERVER_COMMANDS["eval"])
    add_arguments(evaluate)
    evaluate.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="JSONL of GSM8K-format problems")
    parser.add_argument(
        "--exclude",
        type=Path,
        help=f"line numbers never sampled (default for the default data: {DEFAULT_EXCLUDE.relative_to(ROOT)})",
    )
    parser.add_argument("--limit", type=int, default=100, help="problems sampled (default 100)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="sample and sampling seed (default 2026)")
    parser.add_argument("--sizes", default="3,5", help="draft counts compared, comma-separated (default 3,5)")
    parser.add_argument("--ads", type=int, default=20, help="ad-selection instances (0: none; default 20)")
    parser.add_argument("--ads-catalog-size", type=int, default=100, help="ads per catalog (default 100)")
    parser.add_argument("--max-new-tokens", type=int, help="per draft and single pass (default: the server's)")
    parser.add_argument("--refine-max-new-tokens", type=int, help="for the refined answer (default: the server's)")
    parser.add_argument("--temperature", type=float, help="of the pipeline's drafts (default: the server's)")
    parser.add_argument(
        "--no-check-arithmetic",
        dest="check_arithmetic",
        action="store_false",
        help="turn off the Scheduler's default arithmetic pack",
    )
    parser.add_argument(
        "--no-refine-subsets",
        dest="refine_subsets",
        action="store_false",
        help="skip pipeline@n for n below the largest size (one Refiner call per n and problem)",
    )
    parser.add_argument("--name", default="eval", help="results: <results-dir>/<name>.{runs.jsonl,json,md,png}")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--fresh", action="store_true", help="discard the runs file and start over")
    parser.add_argument("--summarize-only", action="store_true", help="rebuild the summary from the runs file")
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="RUNS",
        help="draft once, select many: rank the recorded drafts of a runs file again with every selection policy and "
        "ablation, without a model (seconds); writes <results-dir>/<RUNS name>.replay.{json,md} (docs/eval.md#replay)",
    )
    parser.add_argument("--address", help="a running Scheduler's host:port (default: start the stack here)")
    parser.add_argument("--drafter-address", help="with --address (default: the Scheduler's port + 1)")
    parser.add_argument("--refiner-address", help="with --address (default: the Scheduler's port + 3)")
    parser.add_argument("--timeout", type=float, default=900.0, help="deadline per call in seconds")
    parser.add_argument("--log-dir", type=Path, default=Path(".deliberate/eval-logs"), help="service logs")
    parser.add_argument(
        "--judges",
        help="compare the Verifier's judges: label=setting pairs, comma-separated, each a --judge value, e.g. "
        "rules=off,untrained=transformers,trained=.deliberate/judges/smollm2-135m-judge; one stack and runs file "
        "<name>-<label> each, on the same problems, and <name>.json/.md comparing them (docs/judge.md)",
    )
    parser.add_argument("--judge-model", default="smollm2-135m", help="with --judges: an engine judge's model")
    parser.add_argument("--judge-timeout", type=float, default=60.0, help="with --judges: seconds per verdict")
    parser.add_argument(
        "--early-stop",
        choices=("on", "off", "both"),
        default="on",
        help="the pipeline's early stopping (streaming verification, abort of failed drafts, quorum): on as the "
        "Scheduler defaults, off per request, or both — each problem solved both ways, reported side by side "
        "(default on)",
    )
    parser.add_argument(
        "--cross-refiner-model",
        default="",
        help="also start a Refiner on this model and refine each problem's selected drafts with it too "
        "(record `cross_refine`): the mixed deployment, drafts of one model and the final answer of the other, "
        "on the same drafts",
    )
    parser.add_argument(
        "--problems-from",
        type=Path,
        help="a `deliberate dataset` directory: its GSM8K validation problems (the first --limit of them) "
        "instead of a sample, so a trained judge is measured on problems it never saw",
    )


def engine_and_model() -> tuple[str, str]:
    """What DELIBERATE_ENGINE / DELIBERATE_MODEL select (the services read the same variables)."""
    try:
        from deliberate.core.config import parse_settings
        from deliberate.engines.settings import EngineSettings

        settings = parse_settings(EngineSettings, [])
        return settings.engine, settings.model
    except Exception:  # the server package may be absent where only the client is installed
        return os.environ.get("DELIBERATE_ENGINE", "unknown"), os.environ.get("DELIBERATE_MODEL", "unknown")


def unavailable(record: dict) -> str | None:
    """The error of a call that found a service unreachable (not a result of the problem), if any."""
    parts = [record.get("single", {}), record.get("single_program", {}), record.get("solve", {}),
             record.get("solve_without_early_stop", {}), record.get("cross_refine", {}),
             *record.get("subsets", {}).values()]  # fmt: skip
    return next((p["error"] for p in parts if str(p.get("error", "")).startswith("UNAVAILABLE")), None)


def interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def neighbour(address: str, offset: int) -> str:
    host, port = address.rsplit(":", 1)
    return f"{host}:{int(port) + offset}"


def run(args: argparse.Namespace) -> int:
    if args.replay:
        return replay_runs(args.replay, args.results_dir)
    paths = eval_summary.Paths(args.results_dir, args.name)
    sizes = sorted({int(n) for n in str(args.sizes).split(",") if n.strip()})
    if not sizes or min(sizes) < 1 or max(sizes) > 8:
        print("error: --sizes must be draft counts in 1..8", file=sys.stderr)
        return 2
    engine, model = engine_and_model()
    s = Settings(
        sizes=sizes,
        max_new_tokens=args.max_new_tokens,
        refine_max_new_tokens=args.refine_max_new_tokens,
        temperature=args.temperature,
        seed=args.seed,
        check_arithmetic=args.check_arithmetic,
        refine_subsets=args.refine_subsets,
        ads_catalog_size=args.ads_catalog_size,
        timeout_s=args.timeout,
        engine=engine,
        model=model,
        early_stop=args.early_stop,
        cross_refiner_model=args.cross_refiner_model,
    )
    if args.judges:
        return compare_judges(args, s)
    if args.summarize_only:
        return summarize(paths)
    return run_settings(args, s, paths)


def run_settings(args: argparse.Namespace, s: Settings, paths: eval_summary.Paths) -> int:
    if args.fresh and paths.runs.exists():
        paths.runs.unlink()

    records = read_runs(paths.runs)
    for record in records:
        if record.get("settings") != s.fingerprint():
            print(
                f"error: {paths.runs} holds runs made with other settings ({record.get('settings')}); "
                "pass the same options, --fresh to start over, or another --name",
                file=sys.stderr,
            )
            return 2
    done = {r["id"] for r in records}
    if not args.data.exists():
        print(f"error: no problems at {args.data} (give a GSM8K-format JSONL with --data)", file=sys.stderr)
        return 2
    default_data = args.data.resolve() == DEFAULT_DATA.resolve()
    exclude = read_exclusions(args.exclude or (DEFAULT_EXCLUDE if default_data else None))
    if args.problems_from:
        problems = validation_problems(args.problems_from, args.data, args.limit)
    else:
        problems = load_problems(args.data, args.limit, args.seed, exclude)
    ad_seeds = [args.seed + k for k in range(1, args.ads + 1)]
    todo = [p for p in problems if p.id not in done]
    ads_todo = [seed for seed in ad_seeds if f"ads:{seed}" not in done]
    total = len(problems) + len(ad_seeds)
    print(
        f"eval: {len(problems)} problems from {args.data} (seed {args.seed}, {len(exclude)} lines excluded) and "
        f"{len(ad_seeds)} ad-selection instances; {total - len(todo) - len(ads_todo)} already in {paths.runs}",
        file=sys.stderr,
    )
    if not todo and not ads_todo:
        return summarize(paths)

    try:
        previous_handler = signal.signal(signal.SIGTERM, interrupted)  # `timeout`, `kill`: stop the services too
    except ValueError:  # not the main thread (embedded use): no handler
        previous_handler = None
    try:
        return evaluate(args, s, paths, records, todo, ads_todo, total)
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)


def started_stack(log_dir: Path, prefix: str, what: str, **options) -> Stack | None:
    """A local stack, up, with its state in a new temporary folder named `prefix…`; None (said why, stopped) when
    it did not come up. `options`: more of Stack's arguments."""
    stack = Stack(ports=Ports.free(), log_dir=log_dir, state_dir=Path(tempfile.mkdtemp(prefix=prefix)), **options)
    print(f"starting {what}; logs in {log_dir}/ …", file=sys.stderr)
    try:
        stack.up(timeout_s=600)
    except (RuntimeError, TimeoutError, KeyboardInterrupt) as error:
        print(f"error: {error or 'interrupted'}", file=sys.stderr)
        stack.down()
        return None
    return stack


def started_refiner(log_dir: Path, model: str) -> Stack | None:
    """A Refiner alone on `model` (free ports, logs in log_dir/cross-refiner/), up; None (said why) when not."""
    refiner = Stack(ports=Ports.free(), env={"DELIBERATE_MODEL": model}, log_dir=log_dir / "cross-refiner")
    print(f"starting a second Refiner on {model} …", file=sys.stderr)
    try:
        refiner.start("refiner")
        refiner.wait_healthy(600, services=("refiner",))
    except (RuntimeError, TimeoutError, KeyboardInterrupt) as error:
        print(f"error: {error or 'interrupted'}", file=sys.stderr)
        refiner.down()
        return None
    return refiner


def evaluate(
    args: argparse.Namespace,
    s: Settings,
    paths: eval_summary.Paths,
    records: list[dict],
    todo: list[Problem],
    ads_todo: list[int],
    total: int,
) -> int:
    """Runs what is not done yet on the services (started here unless --address), then summarizes."""
    stack = None
    stopped = False
    if args.address:
        scheduler = args.address
        drafter = args.drafter_address or neighbour(scheduler, 1)
        refiner = args.refiner_address or neighbour(scheduler, 3)
    else:
        stack = started_stack(
            args.log_dir, "deliberate-eval-", f"the four services ({s.engine}, {s.model})", env=s.judge_env()
        )
        if stack is None:
            return 1
        scheduler, drafter, refiner = (stack.address_of(x) for x in ("scheduler", "drafter", "refiner"))
    cross = None
    if s.cross_refiner_model:
        cross = started_refiner(args.log_dir, s.cross_refiner_model)
        if cross is None:
            if stack is not None:
                stack.down()
            return 1

    services = Services(scheduler, drafter, refiner, cross.address_of("refiner") if cross else None)
    progress = Progress(total, total - len(todo) - len(ads_todo))
    tally = eval_summary.Tally(records)
    try:
        jobs = [(p.id, lambda p=p: run_problem(services, s, p)) for p in todo]
        size = s.ads_catalog_size
        jobs += [(f"ads:{seed}", lambda seed=seed: run_ads(services, s, seed, size)) for seed in ads_todo]
        for count, (_, job) in enumerate(jobs, start=1):
            record = job()
            down = unavailable(record)
            if down:  # a service is gone: stop rather than record every remaining problem as failed
                print(f"\nerror: {down}; stopping — rerun to resume", file=sys.stderr)
                stopped = True
                break
            record["settings"] = s.fingerprint()
            record["rss_mb"] = peak_rss(stack)
            record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            append_run(paths.runs, record)
            tally.add(record)
            progress.update(tally.note())
            if count % 10 == 0:
                eval_summary.write_all(paths, quiet=True)
    except KeyboardInterrupt:
        print(f"\ninterrupted; {paths.runs} keeps what finished — rerun to resume", file=sys.stderr)
    finally:
        progress.close()
        services.close()
        for started in (stack, cross):
            if started is not None:
                started.down()
    code = summarize(paths) if paths.runs.exists() else 0
    return 1 if stopped else code


# --------------------------------------------------------------------------------------------------
# Judges compared (--judges)
# --------------------------------------------------------------------------------------------------


def parse_judges(text: str) -> list[tuple[str, str]]:
    """`rules=off,trained=DIR` -> [("rules", "off"), ("trained", "DIR")]."""
    pairs = []
    for item in text.split(","):
        label, sep, setting = item.strip().partition("=")
        if not sep or not label.strip() or not setting.strip():
            raise ValueError(f"--judges: {item!r} is not label=setting")
        pairs.append((label.strip(), setting.strip()))
    if len({label for label, _ in pairs}) != len(pairs):
        raise ValueError("--judges: a label is given twice")
    return pairs


def validation_problems(dataset: Path, data: Path, limit: int) -> list[Problem]:
    """The first `limit` GSM8K problems of a dataset's validation split, in the order they were written (the file
    only grows, so the same limit names the same problems later), read from `data`."""
    lines = []
    path = dataset / "validation.jsonl"
    if path.exists():
        for raw in path.read_text().splitlines():
            meta = json.loads(raw)["meta"] if raw.strip() else {}
            if meta.get("source") == "gsm8k":
                lines.append(int(meta["problem_id"].split(":", 1)[1]))
    wanted = list(dict.fromkeys(lines))[:limit]
    with data.open() as rows:
        by_line = {i: json.loads(row) for i, row in enumerate(rows) if i in set(wanted)}
    return [Problem(f"{data.stem}:{i}", i, by_line[i]["question"], by_line[i]["answer"].rsplit("####", 1)[-1].strip())
            for i in wanted]  # fmt: skip


def compare_judges(args: argparse.Namespace, s: Settings) -> int:
    """One run per judge setting, each on its own stack, then a table of accuracy and latency per setting."""
    from dataclasses import replace

    from deliberate_bench.eval_stats import percentile

    if args.address:
        print("error: --judges starts a stack per judge; leave out --address", file=sys.stderr)
        return 2
    try:
        judges = parse_judges(args.judges)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows = []
    for label, judge in judges:
        engine_judge = judge in ("off", "llamacpp", "transformers", "vllm", "remote")
        setting = replace(s, judge=judge, judge_model=args.judge_model if engine_judge else "",
                          judge_timeout_s=args.judge_timeout)  # fmt: skip
        paths = eval_summary.Paths(args.results_dir, f"{args.name}-{label}")
        print(f"\n== judge {label}: --judge {judge} ==", file=sys.stderr)
        code = run_settings(args, setting, paths)
        if code:
            return code
        records = [r for r in read_runs(paths.runs) if r.get("task") == "gsm8k"]
        solved = [r["solve"] for r in records]
        latencies = [x["latency_s"] for x in solved]
        drafts = [d for x in solved for d in x.get("drafts", [])]
        judged = [d["judge"] for d in drafts if "judge" in d]
        rows.append({
            "label": label,
            "judge": judge,
            "problems": len(records),
            "correct": sum(same_answer(r["solve"].get("answer"), r["gold"]) for r in records),
            "verified": sum(x.get("status") == "VERIFIED" for x in solved),
            "mean_latency_s": round(sum(latencies) / len(latencies), 2) if latencies else None,
            "p95_latency_s": round(percentile(latencies, 0.95), 2) if latencies else None,
            "mean_verify_s": round(sum(x["timings"]["verify"] for x in solved) / len(solved), 2) if solved else None,
            "drafts": len(drafts),
            "drafts_judged": len(judged),
            "judge_said_valid": sum(j["valid"] for j in judged if not j["error"].startswith("judge ")),
            "judge_unusable": sum(j["error"].startswith("judge ") for j in judged),
            "errors": sum(1 for x in solved if x.get("error")),
        })  # fmt: skip
    for row in rows:
        row["accuracy"] = round(row["correct"] / row["problems"], 4) if row["problems"] else None
    environment = {k: v for k, v in sorted(os.environ.items()) if k.startswith("DELIBERATE_")}
    result = {
        "command": "deliberate eval " + " ".join(sys.argv[2:]),
        "environment": environment,  # what the services read besides the flags (the model, re-drafts)
        "settings": s.fingerprint(),
        "judges": rows,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = judges_markdown(result)
    (args.results_dir / f"{args.name}.md").write_text(table)
    print(table)
    return 0


def judges_markdown(result: dict) -> str:
    lines = [
        f"Judges compared on the same {result['judges'][0]['problems']} GSM8K problems: accuracy of the pipeline's "
        "final answer, latency of the whole Solve.",
        "",
        "`" + " ".join(f"{k}={v}" for k, v in result.get("environment", {}).items()) + f" {result['command']}`",
        "",
        "| setting | --judge | accuracy | VERIFIED | mean latency | p95 latency | mean verify stage "
        "| drafts judged | judge said valid | judge unusable |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["judges"]:
        accuracy = "—" if r["accuracy"] is None else f"{r['correct']}/{r['problems']} = {100 * r['accuracy']:.0f} %"
        lines.append(
            f"| {r['label']} | `{r['judge']}` | {accuracy} | {r['verified']} | {r['mean_latency_s']} s "
            f"| {r['p95_latency_s']} s | {r['mean_verify_s']} s | {r['drafts_judged']}/{r['drafts']} "
            f"| {r['judge_said_valid']} | {r['judge_unusable']} |"
        )
    return "\n".join(lines) + "\n"


def summarize(paths: eval_summary.Paths) -> int:
    if not paths.runs.exists():
        print(f"error: no runs in {paths.runs}", file=sys.stderr)
        return 2
    summary = eval_summary.write_all(paths)
    print(eval_summary.markdown(summary))
    print(f"wrote {paths.json}, {paths.markdown}" + (f", {paths.png}" if paths.png.exists() else ""), file=sys.stderr)
    return 0


def replay_runs(runs: Path, results_dir: Path) -> int:
    """`--replay`: the summary of a runs file's recorded drafts, every selection row ranked again (replay.py)."""
    if not runs.exists():
        print(f"error: no runs file {runs}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    result = eval_summary.summary(eval_summary.read_runs(runs))
    paths = eval_summary.Paths(results_dir, runs.name.removesuffix(".jsonl").removesuffix(".runs") + ".replay")
    paths.json.parent.mkdir(parents=True, exist_ok=True)
    paths.json.write_text(json.dumps(result, indent=2) + "\n")
    paths.markdown.write_text(eval_summary.markdown(result))
    print(eval_summary.markdown(result))
    seconds_taken = time.perf_counter() - started
    print(f"replayed {runs} in {seconds_taken:.1f} s; wrote {paths.json}, {paths.markdown}", file=sys.stderr)
    return 0
