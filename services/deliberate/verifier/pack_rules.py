"""Rule packs as rules: a requested pack's parameters validated, the services it declared resolved into its
context, and each of its checks wrapped as one rule (its answer model first, as a shape rule)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from pydantic import ValidationError

from ..core.requests import InvalidArgument
from ..core.schemas import shorten
from ..decisions.packs import Abstained, PackContext, Quality, ReferenceUnavailable, RulePack, registry
from .constraint_spec import ConstraintSpec
from .program import PROGRAM, program_rule
from .rules import MAX_DETAIL_CHARS, Abstain, Draft, Rule

log = logging.getLogger("deliberate.decisions.packs")


def pack_rules(
    spec: ConstraintSpec, context: dict, services: Mapping[str, object], made: list[RulePack] | None = None
) -> tuple[Rule, ...]:
    """`services`: the Verifier's, by name (`service.pack_services`); the pack gets those it declared. `made`
    collects the pack made (for a plan it may compute itself)."""
    if spec.source == PROGRAM:  # built into the Verifier, not a plugin: it reads and writes the draft
        if spec.params:
            raise InvalidArgument(f"{spec.field}.params", "the program check takes no parameters")
        return (program_rule(hard=not spec.soft),)
    packs = registry()
    pack_class = packs.get(spec.source)
    if pack_class is None:
        raise InvalidArgument(f"{spec.field}.rule_pack", f"unknown rule pack {spec.source!r}; known: {sorted(packs)}")
    pack_context = resolve_services(spec, pack_class, services)
    try:
        params = pack_class.params_model.model_validate({**context, **spec.params})
    except ValidationError as error:
        raise InvalidArgument(f"{spec.field}.params", pydantic_summary(error)) from None
    pack = pack_class(params, pack_context)
    if made is not None:
        made.append(pack)
    hard = not spec.soft
    rules = []
    if pack_class.answer_model is not None:
        shape_id = spec.id or pack_class.name
        rules.append(Rule(shape_id, hard, lambda d: pack_shape_check(spec, pack, shape_id, d)))
    checks = pack_class.checks()
    for number, (rule_id, method) in enumerate(checks, start=1):
        substantive = getattr(getattr(pack_class, method), "substantive", True)
        last = number == len(checks)
        rules.append(
            Rule(
                rule_id,
                hard,
                lambda d, r=rule_id, m=method, q=last: pack_check(spec, pack, r, m, d, scores_quality=q),
                substantive=substantive,
                waits_on_network=pack.waits_on_network,
            )
        )
    return tuple(rules)


def resolve_services(spec: ConstraintSpec, pack_class: type[RulePack], services: Mapping[str, object]) -> PackContext:
    """The services `pack_class` declared, from the Verifier's; a required one the Verifier lacks refuses the
    request, naming the pack and the service."""
    missing = [name for name in pack_class.requires if services.get(name) is None]
    if missing:
        offered = sorted(name for name, service in services.items() if service is not None)
        raise InvalidArgument(
            f"{spec.field}.rule_pack",
            f"rule pack {spec.source!r} requires the service {', '.join(map(repr, missing))}, which this Verifier "
            f"does not have (it has: {', '.join(map(repr, offered)) or 'none'})",
        )
    return PackContext({name: services.get(name) for name in (*pack_class.requires, *pack_class.uses)})


def pack_shape_check(spec: ConstraintSpec, pack: RulePack, rule_id: str, draft: Draft) -> tuple[bool, str]:
    try:
        draft.pack_answers[spec.index] = pack.answer_model.model_validate(draft.answer)
    except ValidationError as error:
        return False, f"{rule_id} failed: {pydantic_summary(error)}"
    return True, f"{rule_id} passed: answer matches {pack.answer_model.__name__}"


def pack_check(
    spec: ConstraintSpec, pack: RulePack, rule_id: str, method: str, draft: Draft, scores_quality: bool = False
) -> tuple[bool, str] | Abstain:
    """Runs one check of a pack; it abstains when its input is absent (the answer did not match the
    pack's model, which its soft shape rule already reported) or when the check itself abstains. After the pack's
    last check (`scores_quality`), reached only when no hard check before it failed, the pack scores the plan."""
    if pack.answer_model is None:
        subject = draft.text
    elif spec.index in draft.pack_answers:
        subject = draft.pack_answers[spec.index]
    else:
        return Abstain(f"{rule_id} abstained: the answer does not match {pack.answer_model.__name__}")
    snapshot = pack_snapshot(spec, pack, draft)
    if isinstance(snapshot, ReferenceUnavailable):
        return False, f"{rule_id} failed: reference data unavailable: {snapshot}"
    result = getattr(snapshot, method)(subject)
    if isinstance(result, Abstained):
        return Abstain(f"{rule_id} abstained: {result.detail}")
    passed, detail = result
    if passed and scores_quality:
        draft.quality = scored(snapshot, subject)
    return passed, f"{rule_id} {'passed' if passed else 'failed'}: {detail}"


def scored(pack: RulePack, answer: object) -> Quality | None:
    """The pack's quality of a plan that passed its checks; a pack whose scoring fails scores nothing (its checks
    decide validity, the score only ranks)."""
    try:
        quality = pack.quality(answer)
    except Exception:  # a buggy objective must not fail a feasible plan
        log.exception("rule pack quality failed", extra={"rule_pack": pack.name})
        return None
    if quality is not None and quality.pack is None:
        quality = dataclasses.replace(quality, pack=pack.name)
    return quality


def pack_snapshot(spec: ConstraintSpec, pack: RulePack, draft: Draft) -> RulePack | ReferenceUnavailable:
    """The pack as of this draft's verification: taken at its first check and kept on the draft, so every
    check of the draft reads one version of the reference data (and a store failure is read once)."""
    if spec.index not in draft.pack_snapshots:
        try:
            draft.pack_snapshots[spec.index] = pack.snapshot()
        except ReferenceUnavailable as error:
            draft.pack_snapshots[spec.index] = error
    return draft.pack_snapshots[spec.index]


def pydantic_summary(error: ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "answer"
    more = f" (+{error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return shorten(f"{location}: {first['msg']}{more}", MAX_DETAIL_CHARS)
