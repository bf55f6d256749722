"""`make eval-business`: the three business cases (docs/business-cases.md) solved on the real stack, and every answer
judged by this evaluation, not by the status the Scheduler gave it.

Per instance of `business_instances` (the scored split unless --split tuning) and per row:

* `single`: one prose draft (num_drafts=1, program_drafts=0), the deployment's re-drafts and refinement;
* `single:program`: one program draft (num_drafts=1, program_drafts=1), a decision program reading `ctx`;
* `pipeline`: the default round (--pipeline-drafts, the deployment's share of programs);
* `reference`: no model — the ad pack's exact optimum, the best grid offers for credit, the best full-price plan
  for a promotion.

Each answer is checked here, in process: the output schema, the request's CEL constraints, and the rule pack's own
checks on a pack built from the instance's params and context (credit: the risk model `deliberate.risk.model` in
place of the service). Its objective (total CTR, total amount offered, gross profit) is computed here too, and for
ads divided by the pack's exact optimum (an infeasible answer has ratio 0).

One JSON line per (instance, row) is appended to `bench/runs/<name>.runs.jsonl` at once, so a rerun resumes (a failed
call is recorded and tried again on the next run); the summary (`bench/results/<name>.json`, `.md`, `.png`) is rebuilt
from that file, `--summarize` does only that.

    deliberate bench business-eval --limit 2 --name business-quick
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import cel
import grpc
import jsonschema
from pydantic import ValidationError

from deliberate.risk.client import RiskRejected
from deliberate.risk.model import InvalidInput, score
from deliberate.verifier.packs import Abstained, PackContext, registry
from deliberate.verifier.parsing import extract_json
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.eval import business_instances as bi
from deliberate_bench.eval.calls import strip_trace
from deliberate_bench.eval.outcomes import model_name
from deliberate_bench.eval.services import (
    Services,
    engine_and_model,
    error_text,
    interrupted,
    neighbour,
    started_stack,
)
from deliberate_bench.eval.stats import percentile, wilson
from deliberate_bench.eval.summary import Paths
from deliberate_bench.results import RESULTS, append_run, read_runs, runs_directory
from deliberate_client.client import build_request

ROWS = ("single", "single:program", "pipeline", "reference")
DEFAULT_PIPELINE_DRAFTS = 5  # the Scheduler's default round (docs/scheduler.md)
DEFAULT_SEED = 2026
MAX_DRAFT_TEXT_CHARS = 1500  # a draft's text as recorded: enough to read a program, bounded runs files
SUMMARY_EVERY = 10  # records between summaries during a run
# The variables besides the flags that shape a run (the services read them).
RUN_VARIABLES = ("DELIBERATE_ENGINE", "DELIBERATE_MODEL", "DELIBERATE_MAX_REDRAFTS", "DELIBERATE_PROGRAM_DRAFTS")


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    paths = Paths(args.results_dir, args.name, runs_directory(args.results_dir, args.runs_dir))
    if args.summarize:
        return print_summary(paths, args.split)
    if args.model:
        os.environ["DELIBERATE_MODEL"] = args.model  # read by the stack's services and by engine_and_model
    engine, model = engine_and_model()
    s = Settings(args.seed, args.max_new_tokens, args.refine_max_new_tokens, args.pipeline_drafts, args.timeout,
                 engine, model)  # fmt: skip
    if args.fresh and paths.runs.exists():
        paths.runs.unlink()
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
        for instance in bi.instances(case, args.split)[: args.limit]
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
            if paths.runs.exists():  # what finished before the stop still gets its summary
                write_summaries(paths, args.split)
            return code
    return print_summary(paths, args.split)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(bi.CASES), help="comma-separated (default: all three)")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated (default: all four)")
    parser.add_argument("--limit", type=int, help="the first N instances of each case (default: all)")
    parser.add_argument("--split", choices=("scored", "tuning"), default="scored")
    parser.add_argument("--model", help="DELIBERATE_MODEL for the stack (default: the environment's)")
    parser.add_argument("--max-new-tokens", type=int, help="per draft (default: the server's)")
    parser.add_argument("--refine-max-new-tokens", type=int, help="for the refined answer (default: the server's)")
    parser.add_argument("--pipeline-drafts", type=int, default=DEFAULT_PIPELINE_DRAFTS, help="N of `pipeline`")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="sampling seed (default 2026)")
    parser.add_argument("--name", help="<runs-dir>/<name>.runs.jsonl, <results-dir>/<name>.* (default business, "
                        "business-tuning)")  # fmt: skip
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help="the summaries (default bench/results)")
    parser.add_argument("--runs-dir", type=Path, help="the recorded runs (default bench/runs, or --results-dir)")
    parser.add_argument("--fresh", action="store_true", help="discard the runs file and start over")
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
    args.name = args.name or ("business" if args.split == "scored" else "business-tuning")
    return args


def run(args: argparse.Namespace, s: Settings, paths: Paths, todo: list[tuple[bi.Instance, str]]) -> int:
    """Runs the pairs on the services (started here unless --address; not at all for reference rows alone)."""
    stack = services = None
    try:
        if any(row != "reference" for _, row in todo):
            stack, services = connect(args, s)
            if services is None:
                return 1
        for count, (instance, row) in enumerate(todo, start=1):
            if row == "reference":
                outcome = reference_row(instance)
            else:
                outcome = solve_row(services, s, instance, row)
            if str(outcome.get("error") or "").startswith("UNAVAILABLE"):  # a service is gone: stop, rerun resumes
                print(f"error: {outcome['error']}; stopping — rerun to resume", file=sys.stderr)
                return 1
            record = {"case": instance.case, "id": instance.id, "split": instance.split, "row": row, **outcome,
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
    if not paths.runs.exists():
        print(f"error: no runs in {paths.runs}", file=sys.stderr)
        return 2
    result = write_summaries(paths, split)
    print(markdown(result))
    print(f"wrote {paths.json}, {paths.markdown}, {paths.png}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------------------------------
# The rows
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    seed: int
    max_new_tokens: int | None
    refine_max_new_tokens: int | None
    pipeline_drafts: int
    timeout_s: float
    engine: str
    model: str

    def fingerprint(self) -> dict:
        """What must match for records of two runs to be pooled."""
        return {
            "instance_seed": bi.SEED,
            "seed": self.seed,
            "max_new_tokens": self.max_new_tokens,
            "refine_max_new_tokens": self.refine_max_new_tokens,
            "pipeline_drafts": self.pipeline_drafts,
            "max_redrafts": os.environ.get("DELIBERATE_MAX_REDRAFTS", "deployed"),
            "engine": self.engine,
            "model": self.model,
        }


def request_for(instance: bi.Instance, row: str, s: Settings) -> pb.SolveRequest:
    drafts = {"single": (1, 0), "single:program": (1, 1), "pipeline": (s.pipeline_drafts, None)}
    num_drafts, program_drafts = drafts[row]
    return build_request(
        instance.prompt,
        num_drafts=num_drafts,
        program_drafts=program_drafts,  # None: the deployment's default
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


def reference_plan(instance: bi.Instance) -> dict | None:
    if instance.case == "ads":
        return build_pack(instance, pack_constraint(instance)).reference_answer()
    if instance.case == "credit":
        offers = bi.credit_reference(instance.context["applicant"], instance.meta["offers"])
        plan = [{"amount": o.amount, "annual_rate": o.annual_rate, "term_months": o.term_months} for o in offers]
        return {"offers": plan, "disclosure": instance.context["disclosure"]}
    policy = pack_constraint(instance)["params"]
    return bi.promotion_reference(instance.context["products"], policy)


def judged(j: Judgement) -> dict:
    return {"feasible": j.feasible, "check": j.check, "objective": j.objective, "bound": rounded(j.bound, 6),
            "objective_ratio": j.ratio}  # fmt: skip


def elapsed(started: float) -> float:
    return round(time.perf_counter() - started, 3)


# --------------------------------------------------------------------------------------------------
# Judging an answer, in process
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    feasible: bool
    check: str  # the first constraint missed, or what the plan achieves
    objective: float | None = None  # of a feasible plan
    bound: float | None = None  # the best objective any plan of the instance reaches, where known

    @property
    def ratio(self) -> float | None:
        """objective / bound for a feasible plan, 0 for an infeasible one; None without a bound."""
        if self.bound is None:
            return None
        if not self.feasible or self.objective is None:
            return 0.0
        return 1.0 if self.bound <= 0 else round(self.objective / self.bound, 6)


def judge(instance: bi.Instance, text: str | None) -> Judgement:
    """Whether the answer satisfies every constraint of its request, and how good a plan it is."""
    pack = build_pack(instance, pack_constraint(instance))
    bound = optimum_of(pack)
    plan, error = extract_json(text or "")
    if error is not None or not isinstance(plan, dict):
        return Judgement(False, f"no JSON object: {error or type(plan).__name__}", bound=bound)
    missed = schema_error(instance.output_schema, plan) or cel_failure(instance, plan)
    if missed:
        return Judgement(False, missed, bound=bound)
    try:
        answer = pack.answer_model.model_validate(plan)
    except ValidationError as failure:
        return Judgement(False, f"{pack.name}: {failure.errors()[0]['msg']}", bound=bound)
    for rule_id, method in pack.checks():
        result = getattr(pack, method)(answer)
        if isinstance(result, Abstained):
            continue
        passed, detail = result
        if not passed:
            return Judgement(False, f"{rule_id}: {detail}", bound=bound)
    objective = OBJECTIVES[instance.case](pack, answer)
    return Judgement(True, f"feasible, objective {objective:.6g}", objective, bound)


def build_pack(instance: bi.Instance, constraint: dict):
    """The instance's rule pack as the Verifier builds it: params over context, its declared services resolved."""
    pack_class = registry()[constraint["rulePack"]]
    params = pack_class.params_model.model_validate({**instance.context, **constraint.get("params", {})})
    offered = {"risk": RiskModelInProcess(), "reference": None}
    services = {name: offered.get(name) for name in (*pack_class.requires, *pack_class.uses)}
    return pack_class(params, PackContext(services)).snapshot()


def pack_constraint(instance: bi.Instance) -> dict:
    return next(c for c in instance.constraints if "rulePack" in c)


def optimum_of(pack) -> float | None:
    """The pack's exact optimum where it solves one (the ad pack), else None."""
    reference = pack.reference_answer()
    if reference is None:
        return None
    quality = pack.quality(pack.answer_model.model_validate(reference))
    return None if quality is None else quality.bound


def schema_error(schema: dict, plan: dict) -> str | None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(plan))
    if error is None:
        return None
    where = "/".join(map(str, error.absolute_path)) or "answer"
    return f"output schema: {where}: {error.message[:200]}"


def cel_failure(instance: bi.Instance, plan: dict) -> str | None:
    """The first of the request's CEL constraints the plan fails, with the Verifier's CEL library."""
    context = cel.Context()
    context.add_variable("ctx", instance.context)
    context.add_variable("plan", plan)
    context.add_variable("answer", plan)
    for constraint in instance.constraints:
        if "celExpression" not in constraint:
            continue
        try:
            result = cel.compile(constraint["celExpression"]).execute(context)
        except Exception as error:  # the Rust core raises for missing fields and type errors
            result = error
        if result is not True:
            return f"{constraint['id']}: {constraint.get('failureMessage') or result}"
    return None


class RiskModelInProcess:
    """Stands in for the risk service's client in the credit pack: the same deterministic model, called here."""

    def score_all(self, applicant, offers) -> list:
        results = []
        for offer in offers:
            try:
                results.append(score(applicant, offer))
            except InvalidInput as error:  # what the service answers as INVALID_ARGUMENT
                results.append(RiskRejected(str(error)))
        return results


def total_ctr(pack, answer) -> float:
    return round(sum(pack.ads[i].ctr for i in answer.selected_ids), 6)


def total_amount(pack, answer) -> float:
    return sum(offer.amount for offer in answer.offers)


def gross_profit(pack, answer) -> float:
    lines = pack.lines(answer)
    return round(float(sum((x.revenue - x.cost for x in lines), Fraction(0))), 2)


OBJECTIVES = {"ads": total_ctr, "credit": total_amount, "promotion": gross_profit}
OBJECTIVE_NAMES = {"ads": "total CTR", "credit": "total amount offered", "promotion": "gross profit"}


# --------------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------------


def latest(records: list[dict], split: str) -> dict[tuple[str, str, str], dict]:
    """The last record of each (case, instance, row) of the split: a retried failure replaces the failure."""
    return {(r["case"], r["id"], r["row"]): r for r in records if r.get("split") == split}


def row_summary(records: list[dict]) -> dict:
    judged_records = [r for r in records if r.get("feasible") is not None]
    n = len(judged_records)
    feasible = sum(bool(r["feasible"]) for r in judged_records)
    low, high = wilson(feasible, n)
    ratios = [r["objective_ratio"] for r in judged_records if r.get("objective_ratio") is not None]
    objectives = [r["objective"] for r in judged_records if r["feasible"] and r.get("objective") is not None]
    latencies = [r["latency_s"] for r in records if r.get("latency_s") is not None]
    tokens = [r["tokens"] for r in records if r.get("tokens") is not None]
    return {
        "instances": n,
        "feasible": feasible,
        "feasible_share": rounded(feasible / n) if n else None,
        "feasible_ci_low": rounded(low) if n else None,
        "feasible_ci_high": rounded(high) if n else None,
        "objective_ratio_mean": rounded(statistics.fmean(ratios)) if ratios else None,
        "objective_ratio_p10": rounded(percentile(ratios, 0.10)),
        "objective_mean_of_feasible": rounded(statistics.fmean(objectives)) if objectives else None,
        "verified_infeasible": sum(r.get("status") == "VERIFIED" and r.get("feasible") is False for r in records),
        "statuses": dict(sorted(Counter(r.get("status") or "none" for r in records).items())),
        "errors": sum(bool(r.get("error")) for r in records),
        "latency_p50_s": rounded(percentile(latencies, 0.50), 3),
        "latency_p95_s": rounded(percentile(latencies, 0.95), 3),
        "tokens_mean": rounded(statistics.fmean(tokens), 1) if tokens else None,
    }


def rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def summary(records: list[dict], split: str = "scored") -> dict:
    chosen = latest(records, split)
    result: dict = {}
    for case in bi.CASES:
        of_case = [r for (c, _, _), r in chosen.items() if c == case]
        if not of_case:
            continue
        rows = {row: row_summary([r for r in of_case if r["row"] == row]) for row in ROWS}
        result[case] = {"instances": len({r["id"] for r in of_case}), "objective": OBJECTIVE_NAMES[case],
                        "rows": rows}  # fmt: skip
    settings = [r["settings"] for r in records if "settings" in r]
    result["split"] = split
    result["commands"] = list(dict.fromkeys(r["command"] for r in records if r.get("command")))
    result["model"] = model_name(settings[-1]["model"]) if settings else None
    result["engine"] = settings[-1]["engine"] if settings else None
    result["settings"] = settings[-1] if settings else None
    return result


def markdown(result: dict) -> str:
    lines = [
        f"Business cases ({result['split']} instances), engine `{result['engine']}`, model `{result['model']}`. "
        "Feasible: every constraint of the request holds, checked by the evaluation (schema, CEL, the rule pack in "
        "process); 95 % Wilson interval. Objective ratio: the plan's objective over the exact optimum, 0 for an "
        "infeasible answer (ads only: credit and promotion have no bound).",
        "",
        "| case | row | n | feasible (95 % CI) | VERIFIED but infeasible | objective ratio mean / p10 "
        "| mean objective of feasible | latency p50 / p95 | tokens | errors |",
        "|---|---|---:|---|---:|---|---:|---|---:|---:|",
    ]
    for case in bi.CASES:
        if case not in result:
            continue
        for row, x in result[case]["rows"].items():
            if not x["instances"]:
                lines.append(f"| {case} | `{row}` | 0 | — | — | — | — | — | — | {x['errors']} |")
                continue
            low, high = 100 * x["feasible_ci_low"], 100 * x["feasible_ci_high"]
            feasible = f"{100 * x['feasible_share']:.1f} % ({low:.1f}–{high:.1f} %)"
            ratio = "—"
            if x["objective_ratio_mean"] is not None:
                ratio = f"{x['objective_ratio_mean']:.3f} / {x['objective_ratio_p10']:.3f}"
            objective = "—" if x["objective_mean_of_feasible"] is None else f"{x['objective_mean_of_feasible']:.4g}"
            tokens = "—" if x["tokens_mean"] is None else f"{x['tokens_mean']:.0f}"
            lines.append(
                f"| {case} | `{row}` | {x['instances']} | {feasible} | {x['verified_infeasible']} | {ratio} "
                f"| {objective} | {x['latency_p50_s']} s / {x['latency_p95_s']} s | {tokens} | {x['errors']} |"
            )
    lines += ["", "Objectives: " + "; ".join(f"{c}: {OBJECTIVE_NAMES[c]}" for c in bi.CASES if c in result) + "."]
    lines += ["", *(f"`{command}`" for command in result["commands"])]
    return "\n".join(lines) + "\n"


FEASIBLE_COLOUR, RATIO_COLOUR = "tab:green", "tab:blue"


def plot(result: dict, path: Path) -> bool:
    """Per case, each row's feasible share with its Wilson interval beside its mean objective ratio."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        return False
    cases = [case for case in bi.CASES if case in result]
    if not cases:
        return False
    figure, axes = plt.subplots(1, len(cases), figsize=(4.5 * len(cases), 4.5), sharey=True, squeeze=False)
    width = 0.38
    for axis, case in zip(axes[0], cases, strict=True):
        rows = result[case]["rows"]
        for k, x in enumerate(rows.values()):
            if x["feasible_share"] is not None:
                share = x["feasible_share"]
                error = [[share - x["feasible_ci_low"]], [x["feasible_ci_high"] - share]]
                axis.bar(k - width / 2, share, width, yerr=error, capsize=3, color=FEASIBLE_COLOUR)
            if x["objective_ratio_mean"] is not None:
                axis.bar(k + width / 2, x["objective_ratio_mean"], width, color=RATIO_COLOUR, hatch="//")
        axis.set_xticks(range(len(rows)), list(rows), rotation=20, fontsize=8)
        axis.set_title(f"{case} ({result[case]['instances']} instances)", fontsize=10)
        axis.set_ylim(0, 1.05)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("share; 95 % Wilson interval")
    legend = [Patch(color=FEASIBLE_COLOUR, label="feasible share"),
              Patch(facecolor=RATIO_COLOUR, hatch="//", label="objective ratio (mean)")]  # fmt: skip
    axes[0][0].legend(handles=legend, fontsize=8, loc="upper left")
    figure.suptitle(f"Business cases — {result['engine']}, {result['model']}".replace("$", ""), fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def write_summaries(paths: Paths, split: str) -> dict:
    result = summary(read_runs(paths.runs), split)
    paths.json.parent.mkdir(parents=True, exist_ok=True)
    paths.json.write_text(json.dumps(result, indent=2) + "\n")
    paths.markdown.write_text(markdown(result))
    plot(result, paths.png)
    return result


if __name__ == "__main__":
    sys.exit(main())
