"""`make eval-business`: the three business cases (docs/business-cases.md) solved on the real stack, and every answer
judged by this evaluation, not by the status the Scheduler gave it.

Per instance of `business_instances` (the scored split unless --split tuning) and per row:

* `single`: one prose draft (num_drafts=1, program_drafts=0), the deployment's re-drafts and refinement;
* `single:program`: one program draft (num_drafts=1, program_drafts=1), a decision program reading `ctx`;
* `pipeline`: the default round (--pipeline-drafts, the deployment's share of programs);
* `template`: no model — the decision prompt's worked example program run alone on the request's data
  (`templates`): what the prompt gives for free;
* `reference`: no model — the ad pack's exact optimum, the best grid offers for credit, the best full-price plan
  for a promotion; on the varied split the evaluation's own optimum of the request's rules (`varied_references`).

`--varied` runs the varied split (`varied_instances`: rules beyond the examples, in words and as the request's own
CEL, some instances with no feasible plan at all) in place of the examples' split.

Each answer is checked here, in process: the output schema, the request's CEL constraints, and the rule pack's own
checks on a pack built from the instance's params and context (credit: the risk model `deliberate.risk.model` in
place of the service). Its objective (total CTR, total amount offered, gross profit) is computed here too, and for
ads divided by the pack's exact optimum (an infeasible answer has ratio 0).

One JSON line per (instance, row) is appended to `<name>.runs.jsonl` (in the folder of the study that declares it) at
once, so a rerun resumes (a failed call is recorded and tried again on the next run); the summary (`<name>.json`, `.md`,
`.png`, beside it) is rebuilt from that file, `--summarize` does only that.

    deliberate bench business-eval --limit 2 --name business-quick
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import json_format

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.eval import business_instances as bi
from deliberate_bench.eval import varied_instances as vi
from deliberate_bench.eval import varied_references as vr
from deliberate_bench.eval.business_judge import Judgement, build_pack, judge, pack_constraint
from deliberate_bench.eval.business_references import credit_reference, promotion_reference
from deliberate_bench.eval.business_summary import ROWS, markdown, rounded, write_summaries
from deliberate_bench.eval.calls import strip_trace
from deliberate_bench.eval.services import (
    Services,
    deployment,
    engine_and_models,
    error_text,
    interrupted,
    neighbour,
    started_stack,
)
from deliberate_bench.eval.summary import Paths, add_file_arguments
from deliberate_bench.eval.templates import template_answer
from deliberate_bench.results import append_run, read_runs, remove_runs, runs_directory, runs_present
from deliberate_client.client import build_request

DEFAULT_PIPELINE_DRAFTS = 5  # the Scheduler's default round (docs/scheduler.md)


DEFAULT_SEED = 2026


MAX_DRAFT_TEXT_CHARS = 1500  # a draft's text as recorded: enough to read a program, bounded runs files


SUMMARY_EVERY = 10  # records between summaries during a run


# The variables besides the flags that shape a run (the services read them).
RUN_VARIABLES = (
    "DELIBERATE_ENGINE",
    "DELIBERATE_MODEL",
    "DELIBERATE_MAX_REDRAFTS",
    "DELIBERATE_PROGRAM_DRAFTS",
    "DELIBERATE_DECISION_PROGRAM_DRAFTS",
)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    paths = Paths(args.results_dir, args.name, runs_directory(args.results_dir, args.runs_dir))
    if args.summarize:
        return print_summary(paths, args.split)
    if args.model:
        os.environ["DELIBERATE_MODEL"] = args.model  # read by the stack's services and by engine_and_models
    engine, drafter_model, refiner_model = engine_and_models()
    model = deployment(drafter_model, refiner_model)
    s = Settings(args.seed, args.max_new_tokens, args.refine_max_new_tokens, args.pipeline_drafts, args.timeout,
                 engine, model, "varied" if args.varied else "examples")  # fmt: skip
    if args.fresh:
        remove_runs(paths.runs)
    records = read_runs(paths.runs)
    mixed = next((r["settings"] for r in records if r.get("settings") != s.fingerprint()), None)
    if mixed is not None:
        print(f"error: {paths.runs} holds runs made with other settings ({mixed}); pass the same options, --fresh "
              "or another --name", file=sys.stderr)  # fmt: skip
        return 2
    done = {(r["case"], r["id"], r["row"]) for r in records if not r.get("error")}
    todo = [
        (instance, row)
        for case in args.cases
        for instance in (vi if args.varied else bi).instances(case, args.split)[: args.limit]
        for row in args.rows
        if (case, instance.id, row) not in done
    ]
    print(f"business eval: {len(todo)} (instance, row) pairs to run; {len(done)} already in {paths.runs}",
          file=sys.stderr)  # fmt: skip
    if todo:
        previous = signal.signal(signal.SIGTERM, interrupted)  # `timeout`, `kill`: stop the services too
        try:
            code = run(args, s, paths, todo)
        finally:
            signal.signal(signal.SIGTERM, previous)
        if code:
            if runs_present(paths.runs):  # what finished before the stop still gets its summary
                write_summaries(paths, args.split)
            return code
    return print_summary(paths, args.split)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(bi.CASES), help="comma-separated (default: all three)")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated (default: all four)")
    parser.add_argument("--limit", type=int, help="the first N instances of each case (default: all)")
    parser.add_argument("--split", choices=("scored", "tuning"), default="scored")
    parser.add_argument("--varied", action="store_true", help="the varied split's instances (varied_instances)")
    parser.add_argument("--model", help="DELIBERATE_MODEL for the stack (default: the environment's)")
    parser.add_argument("--max-new-tokens", type=int, help="per draft (default: the server's)")
    parser.add_argument("--refine-max-new-tokens", type=int, help="for the refined answer (default: the server's)")
    parser.add_argument("--pipeline-drafts", type=int, default=DEFAULT_PIPELINE_DRAFTS, help="N of `pipeline`")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="sampling seed (default 2026)")
    parser.add_argument("--name", help="<runs-dir>/<name>.runs.jsonl, <results-dir>/<name>.* (default business, "
                        "business-tuning, business-varied, business-varied-tuning)")  # fmt: skip
    add_file_arguments(parser)
    parser.add_argument("--summarize", action="store_true", help="only rewrite the summaries from the runs file")
    parser.add_argument("--address", help="a running Scheduler's host:port (default: start the stack here)")
    parser.add_argument("--timeout", type=float, default=900.0, help="deadline per Solve in seconds")
    parser.add_argument("--log-dir", type=Path, default=Path(".deliberate/business-eval-logs"), help="service logs")
    args = parser.parse_args(argv)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    args.rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(args.cases) - set(bi.CASES)) + sorted(set(args.rows) - set(ROWS))
    if unknown:
        parser.error(f"unknown cases or rows: {', '.join(unknown)}")
    args.name = args.name or "-".join(["business", *(["varied"] if args.varied else []),
                                       *(["tuning"] if args.split == "tuning" else [])])  # fmt: skip
    return args


def run(args: argparse.Namespace, s: Settings, paths: Paths, todo: list[tuple[bi.Instance, str]]) -> int:
    """Runs the pairs on the services (started here unless --address; not at all for reference rows alone)."""
    stack = services = None
    try:
        if any(row not in WITHOUT_A_MODEL for _, row in todo):
            stack, services = connect(args, s)
            if services is None:
                return 1
        for count, (instance, row) in enumerate(todo, start=1):
            if row in WITHOUT_A_MODEL:
                outcome = WITHOUT_A_MODEL[row](instance)
            else:
                outcome = solve_row(services, s, instance, row)
            if str(outcome.get("error") or "").startswith("UNAVAILABLE"):  # a service is gone: stop, rerun resumes
                print(f"error: {outcome['error']}; stopping — rerun to resume", file=sys.stderr)
                return 1
            record = {"case": instance.case, "id": instance.id, "split": instance.split, "row": row, **outcome,
                      **instance_facts(instance),
                      "settings": s.fingerprint(), "command": command_line(),
                      "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
            append_run(paths.runs, record)
            print(progress_line(count, len(todo), record), file=sys.stderr)
            if count % SUMMARY_EVERY == 0:
                write_summaries(paths, args.split)
    except KeyboardInterrupt:
        print(f"interrupted; {paths.runs} keeps what finished — rerun to resume", file=sys.stderr)
    finally:
        if services is not None:
            services.close()
        if stack is not None:
            stack.down()
    return 0


def connect(args: argparse.Namespace, s: Settings):
    """(stack or None, Services), or (None, None) when the stack did not come up."""
    if args.address:
        return None, Services(args.address, neighbour(args.address, 1), neighbour(args.address, 3))
    stack = started_stack(args.log_dir, "deliberate-biz-", f"the services ({s.engine}, {s.model})", with_gateway=False)
    if stack is None:
        return None, None
    addresses = (stack.address_of(name) for name in ("scheduler", "drafter", "refiner"))
    return stack, Services(*addresses)


def command_line() -> str:
    variables = [f"{name}={os.environ[name]}" for name in RUN_VARIABLES if name in os.environ]
    return " ".join([*variables, "deliberate bench business-eval", *sys.argv[1:]])


def progress_line(count: int, total: int, record: dict) -> str:
    verdict = "feasible" if record["feasible"] else "infeasible"
    outcome = record["error"] or f"{record['status'] or 'no model'}, {verdict}"
    ratio = "" if record.get("objective_ratio") is None else f", ratio {record['objective_ratio']:.3f}"
    where = f"[{count}/{total}] {record['id']} {record['row']}"
    return f"{where}: {outcome}{ratio} ({record['check'][:100]}) {record['latency_s']:.1f} s"


def print_summary(paths: Paths, split: str) -> int:
    if not runs_present(paths.runs):
        print(f"error: no runs in {paths.runs}", file=sys.stderr)
        return 2
    result = write_summaries(paths, split)
    print(markdown(result))
    print(f"wrote {paths.json}, {paths.markdown}, {paths.png}", file=sys.stderr)
    return 0


@dataclass(frozen=True)
class Settings:
    seed: int
    max_new_tokens: int | None
    refine_max_new_tokens: int | None
    pipeline_drafts: int
    timeout_s: float
    engine: str
    model: str
    instances: str = "examples"  # or "varied"

    def fingerprint(self) -> dict:
        """What must match for records of two runs to be pooled."""
        return {
            **({"instances": "varied"} if self.instances == "varied" else {}),  # the examples' records predate it
            "instance_seed": vi.SEED if self.instances == "varied" else bi.SEED,
            "seed": self.seed,
            "max_new_tokens": self.max_new_tokens,
            "refine_max_new_tokens": self.refine_max_new_tokens,
            "pipeline_drafts": self.pipeline_drafts,
            "max_redrafts": os.environ.get("DELIBERATE_MAX_REDRAFTS", "deployed"),
            "engine": self.engine,
            "model": self.model,
        }


# Per model row: (num_drafts, program_drafts, draft_count); 0, None and "": the deployment's. `pipeline` is the round
# of N all at once that the rows before the cascade measured; `cascade` is what a client gets by default.
ROW_REQUESTS = {
    "single": (1, 0, "all_at_once"),
    "single:program": (1, 1, "all_at_once"),
    "pipeline": (None, None, "all_at_once"),
    "cascade": (0, None, "cascade"),
}


def request_for(instance: bi.Instance, row: str, s: Settings) -> pb.SolveRequest:
    num_drafts, program_drafts, draft_count = ROW_REQUESTS[row]
    return build_request(
        instance.prompt,
        num_drafts=s.pipeline_drafts if num_drafts is None else num_drafts,
        program_drafts=program_drafts,  # None: the deployment's default
        draft_count=draft_count,
        max_new_tokens=s.max_new_tokens,
        refine_max_new_tokens=s.refine_max_new_tokens,
        seed=s.seed,
        output_schema=json.dumps(instance.output_schema),
        context=instance.context,
        constraints=instance.constraints,
        request_id=f"business-{instance.id}-{row.replace(':', '-')}",
    )


def solve_row(services: Services, s: Settings, instance: bi.Instance, row: str) -> dict:
    """One Solve through the Scheduler, judged here. A failed call is recorded with its error, not raised."""
    started = time.perf_counter()
    try:
        response = services.scheduler.Solve(request_for(instance, row, s), timeout=s.timeout_s)
    except grpc.RpcError as error:
        no_answer = judged(judge(instance, None)) | {"check": "no answer: the Solve failed"}  # keeps the bound
        return {"error": error_text(error), "status": None, "answer": None, "latency_s": elapsed(started),
                "tokens": None, **no_answer}  # fmt: skip
    latency = elapsed(started)
    answer = strip_trace(response.answer, response.thinking_trace)
    record = {
        "error": None,
        "status": pb.SolveStatus.Name(response.status).removeprefix("SOLVE_STATUS_"),
        "status_reason": response.status_reason,
        "answer": answer,
        "latency_s": latency,
        "tokens": response.usage.completion_tokens,
        "prompt_tokens": response.usage.prompt_tokens,
        "num_drafts": response.num_drafts,
        "rounds": response.rounds,
        "draft_kinds": [r.draft.kind or "prose" for r in response.drafts],
        "drafts": [draft_record(report) for report in response.drafts],
        "redraft_feedback": list(response.redraft_feedback),
        "round_plan": json_format.MessageToDict(response.round_plan, preserving_proto_field_name=True),
        **judged(judge(instance, answer)),
    }
    if response.HasField("quality"):  # the Scheduler's own figure, beside ours
        quality = response.quality
        bound = quality.bound if quality.HasField("bound") else None
        record["service_quality"] = {"objective": quality.objective, "bound": bound}
    return record


def draft_record(report: pb.DraftReport) -> dict:
    """What one draft was and why it failed — which step broke (no program ran, the plan broke a rule) is read
    from these — with its text, shortened."""
    failed = next((r.message for r in report.verdict.rule_results if r.hard and not r.passed), None)
    return {
        "round": report.round,
        "kind": report.draft.kind or "prose",
        "valid": report.verdict.valid,
        "failed": failed,
        "answer": report.verdict.extracted_answer[:500],
        "text": report.draft.text[:MAX_DRAFT_TEXT_CHARS],
    }


def reference_row(instance: bi.Instance) -> dict:
    """The best plan computed without a model; `feasible` null when there is none for this case."""
    started = time.perf_counter()
    plan = reference_plan(instance)
    latency = elapsed(started)
    if plan is None:
        return {"error": None, "status": None, "answer": None, "latency_s": latency, "tokens": 0, "feasible": None,
                "check": "no reference plan", "objective": None, "bound": None, "objective_ratio": None}  # fmt: skip
    answer = json.dumps(plan)
    return {"error": None, "status": None, "answer": answer, "latency_s": latency, "tokens": 0,
            **judged(judge(instance, answer))}  # fmt: skip


def template_row(instance: bi.Instance) -> dict:
    """The worked example's program run alone on the request's data (`templates`), judged like an answer."""
    started = time.perf_counter()
    answer, happened = template_answer(instance)
    latency = elapsed(started)
    outcome = judged(judge(instance, answer))
    if answer is None:
        outcome["check"] = happened
    return {"error": None, "status": None, "answer": answer, "latency_s": latency, "tokens": 0, **outcome}


WITHOUT_A_MODEL = {"reference": reference_row, "template": template_row}


def instance_facts(instance: bi.Instance) -> dict:
    """What the summary groups a varied instance's records by: whether any plan keeps its rules, and which rules."""
    if not vr.is_varied(instance):
        return {}
    return {"solvable": vr.cached_reference(instance) is not None, "rule_kinds": vi.rule_kinds(instance)}


def reference_plan(instance: bi.Instance) -> dict | None:
    if vr.is_varied(instance):
        return vr.cached_reference(instance)
    if instance.case == "ads":
        return build_pack(instance, pack_constraint(instance)).reference_answer()
    if instance.case == "credit":
        offers = credit_reference(instance.context["applicant"], instance.meta["offers"])
        plan = [{"amount": o.amount, "annual_rate": o.annual_rate, "term_months": o.term_months} for o in offers]
        return {"offers": plan, "disclosure": instance.context["disclosure"]}
    policy = pack_constraint(instance)["params"]
    return promotion_reference(instance.context["products"], policy)


def judged(j: Judgement) -> dict:
    return {"feasible": j.feasible, "check": j.check, "objective": j.objective, "bound": rounded(j.bound, 6),
            "objective_ratio": j.ratio}  # fmt: skip


def elapsed(started: float) -> float:
    return round(time.perf_counter() - started, 3)


if __name__ == "__main__":
    sys.exit(main())
