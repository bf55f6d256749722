"""What the load benchmark sends: GSM8K tuning problems and, with `--business-share`, business decisions — one request
in 1/share is an ad selection, credit offer or promotion plan from `business_instances`' **tuning** split, in turn
(never a scored instance), judged by the evaluation's own judge: a right answer is a feasible plan (schema, CEL and
the pack's checks in process).

Every configuration answers a business decision its own way: the Scheduler's rows send the request as a client
would (its schema, context and constraints); the plain single-program server asks the same Drafter for one greedy
decision program and runs it here with the request's data as `ctx` and its pack's functions, the Verifier's
decision-program rule without the rest of its checks (`verifier.decision_program`), its printed plan taken as the
answer."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from deliberate.selection import same_answer
from deliberate.verifier.decision_program import decision_program_rule
from deliberate.verifier.parsing import extract_final_answer
from deliberate.verifier.rules import Draft
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_bench.eval import business_instances as bi
from deliberate_bench.eval.business_judge import build_pack, judge, pack_constraint, program_data
from deliberate_bench.eval.problems import Problem


@dataclass(frozen=True)
class Item:
    """One request of the load as every configuration sends and judges it."""

    id: str
    prompt: str
    right: Callable[[str | None], bool]  # the answer's text → whether it counts as right
    request: dict = field(default_factory=dict)  # build_request's keywords beyond the prompt
    gateway: dict = field(default_factory=dict)  # the chat completion's fields beyond the message
    instance: bi.Instance | None = None  # a business decision's (the single-program server drafts it as one)


def gsm8k_item(problem: Problem) -> Item:
    def right(answer: str | None) -> bool:
        return same_answer(extract_final_answer(answer or ""), problem.gold)

    return Item(problem.id, problem.question, right)


def business_item(instance: bi.Instance) -> Item:
    request = {"output_schema": json.dumps(instance.output_schema), "context": instance.context,
               "constraints": instance.constraints}  # fmt: skip
    gateway = {"response_format": {"type": "json_schema", "json_schema": {"name": "plan", "schema":
               instance.output_schema}}, "context": instance.context, "constraints": instance.constraints}  # fmt: skip
    return Item(instance.id, instance.prompt, lambda answer: judge(instance, answer).feasible, request, gateway,
                instance)  # fmt: skip


def items(problems: list[Problem], business_share: float) -> list[Item]:
    """The requests in the order clients take them (a client takes the next, cycling): with a share, one in
    round(1/share) is the next business decision (ads, credit, promotion, ads, …) among the GSM8K problems."""
    questions = [gsm8k_item(problem) for problem in problems]
    if business_share <= 0:
        return questions
    every = round(1 / business_share)
    per_case = [bi.instances(case, "tuning") for case in bi.CASES]
    decisions = [business_item(i) for group in itertools.zip_longest(*per_case) for i in group if i is not None]
    mixed, next_decision = [], iter(itertools.cycle(decisions))
    for question in questions:
        mixed.append(question)
        if len(mixed) % every == every - 1:
            mixed.append(next(next_decision))
    return mixed


def single_decision_program(drafter, instance: bi.Instance, request_id: str, max_new_tokens: int,
                            timeout: float) -> tuple[str, str | None]:  # fmt: skip
    """(status name, the printed plan or None): one greedy decision program from the Drafter, run here."""
    constraint = pack_constraint(instance)
    data = program_data(instance)
    request = drafter_service_pb2.GenerateDraftsRequest(
        request_id=request_id, prompt=instance.prompt, num_drafts=1, program_drafts=1,
        sampling=common_pb2.SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens),
        output_schema=json.dumps(instance.output_schema), rule_packs=[constraint["rulePack"]],
    )  # fmt: skip
    request.context.update(data)
    try:
        [message] = list(drafter.GenerateDrafts(request, timeout=timeout))
    except grpc.RpcError as error:
        return error.code().name, None
    draft = Draft(text=message.draft.text, finish_reason="", output_schema=instance.output_schema, context=data)
    functions = build_pack(instance, constraint).decision_functions()
    ran, _ = decision_program_rule(data, functions).check(draft)
    return "OK", (json.dumps(draft.json_value) if ran else None)
