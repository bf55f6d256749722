"""How the Scheduler weighs valid drafts, and how those weights are fitted to feedback. Pure domain code, no gRPC.

Among drafts that pass every hard rule the Scheduler ranks by

    final_i = α·score_i + β·(1 − spread) + δ·answer_share_i − γ·latency_i

where ``spread`` is the stddev of the scores of this request's drafts (low spread = drafts agree),
``answer_share_i`` the share of the valid drafts that reached draft i's final answer (self-consistency) and
``latency_i`` the draft's verification latency as a fraction of the verification timeout.

γ follows load (`gamma_for_load`): when the service is saturated, a slow draft costs more. α, β and δ are
learned from feedback: every ``refit_every`` outcomes a logistic regression of outcome on (score, agreement,
answer_share) is fitted and blended into α, β, δ by EWMA (`refit_weights`; see `fit_weights` for features that
did not vary or were not recorded). The decisions and outcomes wait in a store until then: `weight_learner` (one
process, a state file) or `weight_store` (Redis, shared by the replicas).

Learned weights are a vector named by signal: `LEARNED` (signal name -> default weight) is the one declaration
of what is learned, and both stores keep whatever it names (``{"score": α, "agreement": β, "answer_share": δ}``
today). Adding a learned signal is one entry there: from then on the stores keep, report and persist its weight
(starting at its default, with no schema change), and the fit moves it once `DecisionFeatures` records a
feature of that name (until then it is "not recorded" and keeps its weight, like answer_share from a version-1
file). `Weights` keeps the seed's names as views: ``alpha``/``beta``/``delta`` are the weights of score,
agreement and answer_share (`SEED_NAMES`).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ...core.stats import clamp

log = logging.getLogger("deliberate.scheduler.weights")

GAMMA_IDLE = 0.01
GAMMA_SATURATED = 0.05
DEFAULT_GAMMA = 0.02

# The weights learned from feedback: signal name (as `selection` names it) -> default weight. The one
# declaration of what is learned: the stores keep, report and persist exactly these names.
LEARNED: dict[str, float] = {"score": 1.0, "agreement": 0.3, "answer_share": 0.3}

# The seed's names for the first three learned weights: the attributes of `Weights`, the keys of state files of
# schema 1 and 2, and the fields of the Redis weights hash (weight_store.py). A signal added later has no seed name.
SEED_NAMES: dict[str, str] = {"score": "alpha", "agreement": "beta", "answer_share": "delta"}
SEED_SIGNALS = {seed: name for name, seed in SEED_NAMES.items()}  # the other way round


class Weights:
    """The `weighted` policy's weights: the learned ones by signal name (`LEARNED`), and γ, latency's cost (set
    from load, never learned). Immutable; compares by value.

    ``Weights(alpha=…, beta=…, gamma=…, delta=…)`` and the ``alpha``/``beta``/``delta`` attributes are the seed's
    names for the weights of score, agreement and answer_share; ``learned=`` gives any declared weight by its
    signal name. A learned weight not given takes its default from `LEARNED`.
    """

    __slots__ = ("_learned", "_gamma")

    def __init__(
        self,
        alpha: float | None = None,
        beta: float | None = None,
        gamma: float = DEFAULT_GAMMA,
        delta: float | None = None,
        *,
        learned: Mapping[str, float] | None = None,
    ):
        values = dict(LEARNED)
        unknown = set(learned or ()) - set(values)
        if unknown:
            raise ValueError(f"not a learned weight: {sorted(unknown)} (learned: {list(values)})")
        values.update(learned or {})
        for seed, value in (("alpha", alpha), ("beta", beta), ("delta", delta)):
            if value is not None:
                values[SEED_SIGNALS[seed]] = value
        self._learned = MappingProxyType({name: float(value) for name, value in values.items()})
        self._gamma = float(gamma)

    @property
    def alpha(self) -> float:
        """The weight of the draft's verification score."""
        return self._learned["score"]

    @property
    def beta(self) -> float:
        """The weight of agreement among the request's drafts."""
        return self._learned["agreement"]

    @property
    def delta(self) -> float:
        """The weight of the draft's answer share (self-consistency)."""
        return self._learned["answer_share"]

    @property
    def gamma(self) -> float:
        """The penalty per unit of normalized verification latency; set from load, never learned."""
        return self._gamma

    @property
    def by_signal(self) -> Mapping[str, float]:
        """The learned weights by signal name, in the order of `LEARNED` (read-only)."""
        return self._learned

    @property
    def learned(self) -> tuple[float, ...]:
        """The learned weights' values, in the order of `LEARNED` (α, β, δ today)."""
        return tuple(self._learned.values())

    def vector(self) -> dict[str, float]:
        """The weights by the signal they weigh, as the `weighted` selection policy reads them (latency is a cost)."""
        return {**self._learned, "latency": -self._gamma}

    def with_gamma(self, gamma: float) -> Weights:
        return Weights(gamma=gamma, learned=self._learned)

    def with_learned(self, learned: Mapping[str, float]) -> Weights:
        """These weights with some learned ones replaced (by signal name)."""
        return Weights(gamma=self._gamma, learned={**self._learned, **learned})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Weights):
            return NotImplemented
        return dict(self._learned) == dict(other._learned) and self._gamma == other._gamma

    def __hash__(self) -> int:
        return hash((tuple(sorted(self._learned.items())), self._gamma))

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={value!r}" for name, value in self._learned.items())
        return f"Weights({values}, gamma={self._gamma!r})"


# Learning moves weight among the learned weights but keeps their sum, so final scores stay on one scale over time.
WEIGHT_SUM = sum(Weights().learned)


def final_score(score: float, spread: float, latency: float, w: Weights, answer_share: float = 0.0) -> float:
    """α·score + β·(1 − spread) + δ·answer_share − γ·latency; `latency` is already normalized to [0, 1]
    (see `latency_fraction`)."""
    return w.alpha * score + w.beta * (1.0 - spread) + w.delta * answer_share - w.gamma * latency


def score_spread(scores: list[float]) -> float:
    """Population stddev of one request's draft scores; 0.0 for a single draft (nothing to disagree with)."""
    return statistics.pstdev(scores) if len(scores) > 1 else 0.0


def latency_fraction(latency_s: float, timeout_s: float) -> float:
    """Verification latency as a share of the verification timeout, clamped to [0, 1]."""
    if timeout_s <= 0:
        return 1.0
    return clamp(latency_s / timeout_s, 0.0, 1.0)


def gamma_for_load(utilization: float) -> float:
    """γ rises linearly from 0.01 when idle (utilization 0) to 0.05 when saturated (1); clamped outside."""
    return GAMMA_IDLE + (GAMMA_SATURATED - GAMMA_IDLE) * clamp(utilization, 0.0, 1.0)


@dataclass(frozen=True)
class DecisionFeatures:
    """What was known about the chosen answer when it was chosen."""

    score: float
    agreement: float  # 1 − spread of the request's draft scores
    latency: float  # normalized verification latency; kept for analysis, not used by the fit
    answer_share: float | None = None  # None: not recorded (a decision from a version-1 state file)

    def __post_init__(self) -> None:
        # NaN or infinity would poison every later fit and cannot be written as JSON.
        values = (
            self.score,
            self.agreement,
            self.latency,
            *(() if self.answer_share is None else (self.answer_share,)),
        )
        if not all(math.isfinite(value) for value in values):
            raise ValueError(f"decision features must be finite: {self}")


@dataclass(frozen=True)
class Outcome:
    features: DecisionFeatures
    accepted: bool


def refit_weights(current: Weights, outcomes: list[Outcome], blend: float) -> Weights | None:
    """`current` moved by `blend` toward the weights `outcomes` call for (EWMA); None (and logged) when the
    window carries no signal (see `fit_weights`). Deterministic: the same inputs give the same weights."""
    fitted = fit_weights(outcomes, current)
    if fitted is None:
        log.info("weights refit skipped: the window carries no signal about how to split the weights")
        return None
    before, after = current.by_signal, fitted.by_signal
    # A weight the fit left alone keeps its exact value (blending it with itself would drift in the last bit).
    refitted = current.with_learned(
        {name: (1 - blend) * before[name] + blend * after[name] for name in before if after[name] != before[name]}
    )
    log.info(
        "weights refit: %s",
        ", ".join(f"{name} {before[name]:.3f} -> {value:.3f}" for name, value in refitted.by_signal.items()),
    )
    return refitted


# --------------------------------------------------------------------------------------------------
# Fitting
# --------------------------------------------------------------------------------------------------

FIT_ITERATIONS = 300
FIT_LEARNING_RATE = 0.5
FIT_L2 = 1e-3  # keeps coefficients finite when a feature separates the outcomes perfectly
MIN_FEATURE_SPREAD = 1e-6


def fit_weights(outcomes: list[Outcome], current: Weights | None = None) -> Weights | None:
    """Learned weights that rank answers the way the outcomes say; None if the window carries no signal.

    Fits P(accepted) = σ(b + c_s·score + c_a·agreement + c_d·answer_share + …) over the *fittable* learned
    signals (`LEARNED`) and splits their current weights' sum (`WEIGHT_SUM` when all three are fittable) in
    proportion to the positive parts of their coefficients; the other weights keep their `current` values. A
    signal is fittable when every outcome recorded it as a `DecisionFeatures` field of its name (answer_share
    may be missing from decisions of an old state file; a signal declared learned but not yet recorded is
    missing from all) and it varied (else its coefficient is undetermined). The coefficients are on the raw features,
    the same scale `final_score` uses them on, so the split means "how much one unit of score is worth
    against one unit of agreement". The price of the raw scale: a feature with a narrow range (agreement
    lies in [0.5, 1]) gets its estimation noise magnified, and clamping at zero turns a useless feature's
    noise into a small positive weight. One window is noisy; the EWMA across windows is what the Scheduler
    should trust.

    No signal, and the weights stay as they are, when: all outcomes agree (every coefficient would just
    follow the features' means), fewer than two features are fittable (nothing to split), or no fittable
    feature predicts acceptance (every coefficient <= 0).
    """
    current = current or Weights()
    labels = [1.0 if outcome.accepted else 0.0 for outcome in outcomes]
    if not outcomes or min(labels) == max(labels):
        return None
    names = list(current.by_signal)
    columns = {name: [getattr(outcome.features, name, None) for outcome in outcomes] for name in names}
    fittable = [name for name in names if None not in columns[name] and _spread(columns[name]) >= MIN_FEATURE_SPREAD]
    if len(fittable) < 2:
        return None
    rows = [tuple(columns[name][i] for name in fittable) for i in range(len(outcomes))]
    coefficients = logistic_coefficients(rows, labels)
    if coefficients is None:
        return None
    positive = [max(c, 0.0) for c in coefficients]
    total = sum(positive)
    if total <= 0.0:
        return None
    free = sum(current.by_signal[name] for name in fittable)
    return current.with_learned({name: free * p / total for name, p in zip(fittable, positive, strict=True)})


def _spread(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def logistic_coefficients(rows: list[tuple[float, ...]], labels: list[float]) -> list[float] | None:
    """Per-feature coefficients of an L2-regularized logistic regression, on the raw feature scale.

    Plain batch gradient descent on standardized features (so one learning rate suits every feature),
    converted back to the raw scale at the end. None when a feature has (almost) no spread.
    """
    n, width = len(rows), len(rows[0])
    means = [sum(row[j] for row in rows) / n for j in range(width)]
    spreads = [math.sqrt(sum((row[j] - means[j]) ** 2 for row in rows) / n) for j in range(width)]
    if min(spreads) < MIN_FEATURE_SPREAD:
        return None
    standardized = [[(row[j] - means[j]) / spreads[j] for j in range(width)] for row in rows]
    bias, coefficients = 0.0, [0.0] * width
    for _ in range(FIT_ITERATIONS):
        bias_gradient, gradients = 0.0, [0.0] * width
        for x, y in zip(standardized, labels, strict=True):
            error = _sigmoid(bias + sum(c * v for c, v in zip(coefficients, x, strict=True))) - y
            bias_gradient += error
            for j in range(width):
                gradients[j] += error * x[j]
        bias -= FIT_LEARNING_RATE * bias_gradient / n
        for j in range(width):
            coefficients[j] -= FIT_LEARNING_RATE * (gradients[j] / n + FIT_L2 * coefficients[j])
    return [c / s for c, s in zip(coefficients, spreads, strict=True)]


def _sigmoid(z: float) -> float:
    # Two branches so math.exp never overflows.
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)
