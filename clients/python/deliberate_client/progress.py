"""What `deliberate solve` prints: each stage event as it arrives, then the answer, its status and every draft's
verdict."""

from __future__ import annotations

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb


class ProgressView:
    """Prints each stage event as it arrives, then a summary of every draft's verdict."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.final: pb.SolveResponse | None = None
        self.index: dict[str, int] = {}
        self.refining = False
        self.streamed = ""  # the refined answer as it streamed

    def say(self, text: str = "", end: str = "\n") -> None:
        if not self.quiet:
            print(text, end=end, flush=True)

    def show(self, event: pb.SolveStreamResponse) -> None:
        kind = event.WhichOneof("event")
        if kind == "round_started":
            r = event.round_started
            self.say(f"round {r.round}: {r.num_drafts} drafts — {r.reason}")
            if r.feedback:
                self.say(f"  feedback into the prompt: {r.feedback}")
        elif kind == "draft_generated":
            d = event.draft_generated.draft
            self.index[d.id] = d.index
            reason = common_pb2.FinishReason.Name(d.finish_reason).removeprefix("FINISH_REASON_").lower()
            self.say(
                f"  draft #{d.index} generated  {d.usage.completion_tokens:>4} tokens  {reason:<7}"
                f" {d.generation_latency.ToTimedelta().total_seconds():5.1f}s  [{d.strategy}]"
            )
        elif kind == "draft_verified":
            v = event.draft_verified.verdict
            mark = "valid  " if v.valid else "INVALID"
            failed = [r.message for r in v.rule_results if not r.passed]
            abstained = [r.message for r in v.rule_results if r.abstained]
            detail = f"  ({'; '.join(failed + abstained)})" if failed or abstained else ""
            checked = f"  checked by {', '.join(v.evidence)}" if v.evidence else ("  format only" if v.valid else "")
            self.say(
                f"  draft #{self.index.get(v.draft_id, '?')} verified   {mark} score {v.score:.2f}{checked}{detail}"
            )
        elif kind == "draft_selected":
            s = event.draft_selected
            self.say(f"  draft #{self.index.get(s.draft_id, '?')} selected   rank {s.rank}, score {s.score:.2f}")
        elif kind == "draft_discarded":
            s = event.draft_discarded
            self.say(f"  draft #{self.index.get(s.draft_id, '?')} discarded  {s.reason}")
        elif kind == "consensus_prefix":
            c = event.consensus_prefix
            agreed = f"{c.computations} computations" if c.basis == "computations" else f"{c.lines} lines"
            self.say(
                f"  consensus prefix: {len(c.supporting_draft_ids)} drafts agree on {agreed}, in the words of draft"
                f" #{self.index.get(c.source_draft_id, '?')}: {c.text.strip()[:120]!r}"
            )
        elif kind == "thinking_trace":
            self.say(f"  {event.thinking_trace.text}")
        elif kind == "refine_chunk":
            if not self.refining:
                self.refining = True
                self.say("\nanswer:")
            self.streamed += event.refine_chunk.text
            self.say(event.refine_chunk.text, end="")
        elif kind == "final":
            self.final = event.final
            self.summary(event.final)

    def summary(self, r: pb.SolveResponse) -> None:
        t = r.timings
        stages = ("draft", "verify", "select", "refine", "total")
        timing = "  ".join(f"{s} {getattr(t, s).ToTimedelta().total_seconds():.2f}s" for s in stages)
        if r.answer.strip() != self.streamed.strip():  # the refinement was rejected: the answer is a draft's
            self.say(f"\n\nanswer:\n{r.answer.strip()}", end="")
        self.say(f"\n\nstatus  {pb.SolveStatus.Name(r.status).removeprefix('SOLVE_STATUS_')} — {r.status_reason}")
        for line in verified_by_lines(r) + plan_lines(r):
            self.say(line)
        # `final` is the ranking policy's value; the formula below is the default policy's ("weighted").
        policy = r.selection_policy or "weighted"
        ranked_by = f"; ranked by {policy}" if r.selection_policy else ""
        if r.HasField("round_plan"):
            self.say(round_line(r.round_plan))
        self.say(f"drafts  {r.num_drafts} per round ({r.num_drafts_reason}); rounds {r.rounds}{ranked_by}; verdicts:")
        for report in r.drafts:
            v, c = report.verdict, report.components
            mark = "*" if report.selected else " "
            formula = (
                f" = {c.alpha:.2f}·{c.score:.2f} + {c.beta:.2f}·{c.agreement:.2f} "
                f"+ {c.delta:.2f}·{c.answer_share:.2f} − {c.gamma:.3f}·{c.latency:.2f}"
                if policy == "weighted"
                else f" ({policy})"
            )
            self.say(
                f" {mark} r{report.round} #{report.draft.index} {'valid  ' if v.valid else 'invalid'} "
                f"final {c.final:.3f}{formula}"
                + (f"  duplicate of {report.duplicate_of}" if report.duplicate_of else "")
                + placement_note(report)
            )
            self.say("      " + "; ".join(x.message for x in v.rule_results))
        if r.final_text == pb.FINAL_TEXT_PASS_THROUGH:
            self.say("refine  none: the best draft passed through, its final line in plain text")
        else:
            self.say(f"refine  budget {r.refine_token_budget} tokens ({r.refine_budget_reason})")
        if r.consensus_prefix:
            self.say(f"        started from the drafts' consensus prefix: {r.consensus_prefix.strip()[:120]!r}")
        self.say(f"tokens  prompt {r.usage.prompt_tokens}, completion {r.usage.completion_tokens}")
        self.say(f"timings {timing}")
        self.say(f"trace   {r.trace_id}   request {r.request_id}")


def placement_note(report: pb.DraftReport) -> str:
    """``  on 10.0.0.2:50052 (moved from 10.0.0.3:50052: replica … lost: …)`` with several Drafter replicas."""
    if not report.HasField("placement"):
        return ""
    placement = report.placement
    moved = f" (moved from {placement.moved_from}: {placement.moved_reason})" if placement.moved_from else ""
    return f"  on {placement.replica}{moved}"


def plan_lines(r: pb.SolveResponse) -> list[str]:
    """The answer's plan quality, each re-draft round's feedback, and — beside an UNVERIFIED answer only, labelled
    as what it is — the plan a rule pack computed itself."""
    lines = [f"quality {r.quality.description}"] if r.HasField("quality") else []
    lines += [f"re-draft {n} was told: {feedback}" for n, feedback in enumerate(r.redraft_feedback, start=1)]
    if r.HasField("reference_plan"):
        plan = r.reference_plan
        quality = f" ({plan.quality.description})" if plan.HasField("quality") else ""
        lines.append(
            f"suggestion, not a drafted answer and not the answer: the {plan.rule_pack} pack's own plan "
            f"{plan.answer}{quality}"
        )
    return lines


def round_line(plan: pb.RoundPlan) -> str:
    """How the first round drafted and why it stopped, on one line."""
    policy = f" {plan.policy}" if plan.policy else ""
    stages = f"{plan.stages} stage{'s' * (plan.stages != 1)}"
    drafts = f"{plan.drafts_started} of {plan.max_drafts} drafts in {stages}"
    return f"round   {plan.way}{policy}: {drafts}; {plan.stop_reason}"


def verified_by_lines(r: pb.SolveResponse) -> list[str]:
    """The checks behind a VERIFIED status, each with the best selected draft's message for it:
    ``checked arithmetic passed: 2 equations recomputed, all correct``."""
    if r.status != pb.SOLVE_STATUS_VERIFIED or not r.verified_by:
        return []
    best = next((d for d in r.drafts if r.selected_draft_ids and d.draft.id == r.selected_draft_ids[0]), None)
    messages = {x.rule_id: x.message for x in best.verdict.rule_results} if best else {}
    if best is not None and best.verdict.HasField("judge"):
        judge = best.verdict.judge
        messages["judge"] = f"judge (hard) found it valid, score {judge.score:.2f}"
    return [f"checked {messages.get(rule_id, rule_id)}" for rule_id in r.verified_by]
