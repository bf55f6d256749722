"""Rule packs: named domain checks written in Python, requested by name in a Constraint.

A pack is a `RulePack` subclass with a pydantic model for the answer (its validators are the pack's
first, structural rule) and a parameters model read from the request's context plus the constraint's
params; each method decorated with `@check("budget_check")` becomes one more rule with that id.

Packs are found in `REGISTRY`: every pack — those shipped with deliberate (`deliberate.rule_packs`: arithmetic, ad
selection, credit, promotion) as much as a user's — is installed under the `deliberate.rule_packs` entry-point group
(`my_pack = my_module:MyPack`). No service imports a pack by name.

A pack gets a context, not the Verifier's services: it declares by name the services it cannot check without
(`requires`) and those it reads where the Verifier has them (`uses`); the Verifier resolves them into the pack's
`PackContext` and refuses a request for a pack whose required service it lacks. The names the Verifier offers are
its `service.pack_services`. A pack that reads reference data from the store (`reference.py`) does so in
`snapshot()`, once per verification, so all its checks see one version of the data; a pack that reads the store or
calls a service says so with `waits_on_network`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import ClassVar

from pydantic import BaseModel

from .prompts import DecisionPrompt

__all__ = [
    "Abstained",
    "CheckResult",
    "PackContext",
    "Quality",
    "ReferenceUnavailable",
    "RulePack",
    "check",
    "decision_data",
    "register",
]

log = logging.getLogger("deliberate.decisions.packs")

ENTRY_POINT_GROUP = "deliberate.rule_packs"


class ReferenceUnavailable(Exception):
    """A pack's reference data could not be read (`reference.ReferenceStore`); the message names the store and says
    why. Here, not beside the store, so that reading a pack needs no Redis client (the Drafter reads a pack's
    prompt)."""


@dataclass(frozen=True)
class Abstained:
    """What a check returns when its inputs are absent (nothing to check): the rule message becomes
    "<check id> abstained: <detail>". Neither a pass nor evidence; it never invalidates a draft."""

    detail: str


# A check returns (passed, detail) or `Abstained`; the rule message becomes "<check id> passed|failed: <detail>".
CheckResult = tuple[bool, str] | Abstained


def check(rule_id: str, substantive: bool = True) -> Callable:
    """Marks a pack method as a check. ``substantive=False`` for a check that only records something
    (it always passes) and so is no evidence that the answer holds."""

    def mark(method: Callable) -> Callable:
        method.rule_id = rule_id
        method.substantive = substantive
        return method

    return mark


@dataclass(frozen=True)
class Quality:
    """How good a plan that passed the pack's checks is: its `objective` (higher is better, in the business's own
    unit) and, where the pack can compute it, the best value any plan of this request can reach (`bound`)."""

    name: str  # what the objective measures, e.g. "total ctr"
    objective: float
    bound: float | None = None  # None: the pack computes no bound for this request
    pack: str | None = None  # the pack that scored it (the Verifier fills it in)

    @property
    def ratio(self) -> float | None:
        """objective / bound in [0, 1] (1.0 when the bound is 0); None without a bound."""
        if self.bound is None:
            return None
        return 1.0 if self.bound <= 0 else max(0.0, min(1.0, self.objective / self.bound))

    def describe(self) -> str:
        """``total ctr 0.2140 of the optimum 0.2210 (ratio 0.968, gap 3.2 %)``; ``… (no bound computed)``."""
        if self.bound is None:
            return f"{self.name} {self.objective:.4g} (no bound computed)"
        ratio = self.ratio
        return (
            f"{self.name} {self.objective:.4g} of the optimum {self.bound:.4g} "
            f"(ratio {ratio:.3f}, gap {(1 - ratio) * 100:.1f} %)"
        )


@dataclass(frozen=True)
class PackContext:
    """The Verifier's services a pack declared (`RulePack.requires` and `uses`), by name: `context["name"]`. A
    required one is always there; a used one the Verifier lacks is None."""

    services: Mapping[str, object] = field(default_factory=dict)

    def __getitem__(self, name: str) -> object:
        if name not in self.services:
            raise KeyError(f"service {name!r} is not declared in the pack's `requires` or `uses`")
        return self.services[name]


class RulePack:
    name: ClassVar[str]
    # Validates the parsed answer; None for packs that read the draft's text instead (arithmetic).
    answer_model: ClassVar[type[BaseModel] | None] = None
    params_model: ClassVar[type[BaseModel]]
    # Services of the Verifier the pack cannot check without: a request for it is refused where one is missing.
    requires: ClassVar[tuple[str, ...]] = ()
    # Services it reads where the Verifier has them (None in its context where not).
    uses: ClassVar[tuple[str, ...]] = ()
    # Params that are request data (the ad pack's `catalog`): a decision program reads them in `ctx` beside the
    # request's context (`decision_data`).
    data_params: ClassVar[tuple[str, ...]] = ()
    # The pack solves its request's question exactly (its quality has a bound: the ad pack's optimum). Such a
    # question is a selection that an exact engine answers, and decision programs call one (`best_rows`), so the
    # Scheduler gives them more of a round (`--bounded-decision-program-drafts`).
    exact_optimum: ClassVar[bool] = False
    # What a decision program is told about the functions the pack gives it (`decision_functions`): the Drafter puts
    # it in the program prompt in place of the exact engine's (`prompts.decision_prompt_of`). None: the engine's.
    decision_prompt: ClassVar[DecisionPrompt | None] = None

    def __init__(self, params: BaseModel, context: PackContext | None = None):
        """`context`: what the Verifier resolved (`pack_rules`); None, as a test may make a pack that requires
        nothing, gives every used service as None."""
        if context is None and self.requires:
            raise ValueError(f"the {self.name} pack requires {', '.join(self.requires)}: give it a PackContext")
        self.params = params
        self.context = context or PackContext(dict.fromkeys(self.uses))

    @property
    def waits_on_network(self) -> bool:
        """Whether the checks wait on the network: `snapshot()` reading the reference store, or a check calling
        a service. The Verifier then runs the verification off its event loop."""
        return False

    def snapshot(self) -> RulePack:
        """The pack one verification's checks run on, called once per draft before its first check. A pack
        with reference data in the store reads it here, once, so every check of the draft sees the same
        version, and raises `ReferenceUnavailable` when it cannot (the checks then fail with its message)."""
        return self

    def quality(self, answer: BaseModel) -> Quality | None:
        """The objective of `answer` (the pack's answer model, validated) once every check of the pack passed, and
        the best value possible where the pack can compute it; None for a pack with no objective. Called on the
        snapshot the checks ran on."""
        return None

    def decision_functions(self) -> dict[str, Callable]:
        """The functions a decision program of this request may call, by name (the Drafter describes them with the
        pack's `decision_prompt`), run in the Verifier's process
        on the plain values the sandbox passes; the sandbox bounds how often (`decision_program.HOST_CALLS`). A
        function sees this request only: the pack's params, never another's."""
        return {}

    def reference_answer(self) -> dict | None:
        """A plan the pack computes itself that passes its checks (the ad pack: the solver's optimum), offered to
        the client as a labelled suggestion when no draft is feasible — never an answer. None where it has none."""
        return None

    @classmethod
    def checks(cls) -> list[tuple[str, str]]:
        """(rule id, method name) of every @check, in definition order."""
        return [
            (member.rule_id, name)
            for klass in reversed(cls.__mro__)
            for name, member in vars(klass).items()
            if hasattr(member, "rule_id")
        ]


def solves_exactly(constraints) -> bool:
    """Whether a requested pack computes the exact optimum of the request's question (`RulePack.exact_optimum`).
    `constraints`: as `decision_data` takes them."""
    packs = registry()
    return any(c.kind == "rule_pack" and getattr(packs.get(c.source), "exact_optimum", False) for c in constraints)


def decision_data(context: dict, constraints) -> dict:
    """What a decision program reads as `ctx`: the request's context, plus each requested pack's data params
    (`RulePack.data_params`) that the context does not already hold. `constraints`: objects with `kind`, `source`
    and `params` (the Verifier's ConstraintSpec; the Scheduler's are adapted to it)."""
    data = dict(context)
    for constraint in constraints:
        if constraint.kind != "rule_pack":
            continue
        pack = registry().get(constraint.source)
        for name in pack.data_params if pack is not None else ():
            if name in constraint.params and name not in data:
                data[name] = constraint.params[name]
    return data


REGISTRY: dict[str, type[RulePack]] = {}


def register(pack: type[RulePack]) -> type[RulePack]:
    if pack.name in REGISTRY and REGISTRY[pack.name] is not pack:
        raise ValueError(f"rule pack {pack.name!r} is registered twice")
    REGISTRY[pack.name] = pack
    return pack


def pack_class(name: str) -> type[RulePack] | None:
    """One pack by name, loading its own entry point only: the Drafter reads a pack's prompt so, without the other
    packs' dependencies. None for a name no installed pack has, or one that fails to load (logged)."""
    if name in REGISTRY:
        return REGISTRY[name]
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            return register(entry.load())
        except Exception:  # a broken third-party pack must not stop the service
            log.exception("rule pack failed to load", extra={"entry_point": entry.value})
    return None


def load_registry() -> dict[str, type[RulePack]]:
    """Every pack installed under the entry-point group (the arithmetic pack shipped with deliberate as well)."""
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            register(entry.load())
        except Exception:  # a broken third-party pack must not stop the Verifier
            log.exception("rule pack failed to load", extra={"entry_point": entry.value})
    return REGISTRY


@cache
def registry() -> dict[str, type[RulePack]]:
    """The registry, loaded on first use."""
    return load_registry()
