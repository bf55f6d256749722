"""The `template` row: what a decision prompt gives for free — its worked example's program run alone, no model, on
the request's `ctx`, with only what a model copies from the question put in. For ads the exact engine's example (a
made-up question about boxes) with the catalog's names in place of the boxes': the rows within the pool, the field
`ctr` maximized, the count `picks`, the budget on `cost`, one per `category` when the pack's rule is on. For credit
and promotion the pack's own example: the promotion's count of products set to the question's; the credit example's
one offer at its own rate and term has no number of offers to set. On the examples' split the ads plan is feasible
on every scored instance (those requests have the engine example's shape); since issue 55 the credit and promotion
examples have shapes of their own (one offer; a clearance at one discount), and the varied split leaves all three
behind."""

from __future__ import annotations

import contextlib
import io
import json
import re

from deliberate.rule_packs.credit.prompt import SCORE_OFFER_EXAMPLE
from deliberate.rule_packs.promotion.prompt import PROMOTION_EXAMPLE
from deliberate.verifier.decision_program import SolverCalls
from deliberate_bench.eval import business_instances as bi
from deliberate_bench.eval.business_judge import build_pack, pack_constraint, program_data
from deliberate_client.examples import promotion

AD_EXAMPLE = """
rows = [a for a in ctx["catalog"] if a["id"] in ctx["pool"]]
plan = best_rows(rows, maximize="ctr", count=ctx.get("picks"), at_most={"cost": ctx["budget"]},
                 one_per="category" if ctx.get("one_per_category") else None)
answer = {"selected_ids": [a["id"] for a in plan]}
print(json.dumps(answer))
"""


def code_of(example: str) -> str:
    return example[example.index("```python") + len("```python\n") : example.rindex("```")]


def with_number(code: str, variable: str, value: int) -> str:
    """The example with `variable = <n>` set to the question's number, as a model copying it would write."""
    changed, found = re.subn(rf"^{variable} = \d+", f"{variable} = {value}", code, count=1, flags=re.M)
    if not found:
        raise ValueError(f"the worked example no longer sets {variable}; update templates.py")
    return changed


def template_program(instance: bi.Instance) -> str:
    if instance.case == "ads":
        return AD_EXAMPLE
    if instance.case == "credit":
        return code_of(SCORE_OFFER_EXAMPLE)
    return with_number(code_of(PROMOTION_EXAMPLE), "most", promotion.MAX_ITEMS)


def template_answer(instance: bi.Instance) -> tuple[str | None, str]:
    """(the JSON the example program printed last, or None; what happened)."""
    constraint = pack_constraint(instance)
    ctx = program_data(instance)  # what the request's decision programs read
    names = {"ctx": ctx, "json": json, "best_rows": SolverCalls(ctx).best_rows}
    names |= build_pack(instance, constraint).decision_functions()  # score_offer, largest_discount: as the sandbox
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(template_program(instance), names)  # noqa: S102 — the project's own example, not a model's text
    except Exception as error:  # the example does not fit the request: that is the row's finding
        return None, f"the example program failed: {type(error).__name__}: {error}"
    lines = printed.getvalue().strip().splitlines()
    return (lines[-1], "the example program printed a plan") if lines else (None, "the example printed nothing")
