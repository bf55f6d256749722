"""How the Scheduler weighs valid drafts, and how it learns those weights from feedback. Pure domain code, no gRPC.

Among drafts that pass every hard rule the Scheduler ranks by

    final_i = α·score_i + β·(1 − spread) + δ·answer_share_i − γ·latency_i

where ``spread`` is the stddev of the scores of this request's drafts (low spread = drafts agree),
``answer_share_i`` the share of the valid drafts that reached draft i's final answer (self-consistency) and
``latency_i`` the draft's verification latency as a fraction of the verification timeout.

γ follows load (`gamma_for_load`): when the service is saturated, a slow draft costs more. α, β and δ are
learned online by `WeightLearner`: at solve time the Scheduler records what it knew about the chosen answer
(`record`); a later ``SubmitFeedback`` says whether that answer was accepted (`submit`). Every ``refit_every``
outcomes a logistic regression of outcome on (score, agreement, answer_share) is fitted and blended into α, β,
δ by EWMA (see `fit_weights` for features that did not vary or were not recorded).

Learned weights are a vector named by signal: `LEARNED` (signal name -> default weight) is the one declaration
of what is learned, and both stores keep whatever it names (``{"score": α, "agreement": β, "answer_share": δ}``
today). Adding a learned signal is one entry there: from then on the stores keep, report and persist its weight
(starting at its default, with no schema change), and the fit moves it once `DecisionFeatures` records a
feature of that name (until then it is "not recorded" and keeps its weight, like answer_share from a version-1
file). `Weights` keeps the seed's names as views: ``alpha``/``beta``/``delta`` are the weights of score,
agreement and answer_share (`SEED_NAMES`).

State file schema versions (`WeightLearner.save` writes 3; 1, 2 and 3 load):

- 1: ``weights: {alpha, beta}``, rows ``[score, agreement, latency]``; δ takes its default and the decisions
  have no answer_share (None), which keeps δ out of a fit that includes them.
- 2: ``weights: {alpha, beta, delta}``, rows ``[score, agreement, latency, answer_share or null]``.
- 3: ``weights`` keyed by signal name (``{"score": …, "agreement": …, "answer_share": …}``), rows as in 2. A
  declared signal missing from the file takes its default; a name this version does not declare (written by a
  newer one) is ignored, and dropped at the next write.

Persistence: with a ``path``, every `record` and `submit` rewrites the state file atomically before returning
(autosave), so a restart — crash or not — loses nothing that a call has returned from. The price is a full
rewrite per call: O(pending), about 10–30 ms at the 10,000-decision bound. Requests spend seconds on drafting,
so that is small; if it ever is not, construct with ``autosave=False`` and call `flush` periodically and at
shutdown, accepting that a crash loses the decisions since the last flush (their feedback is then refused as
an unknown request — counted, never an error).

Replicas: `WeightLearner` is one process's state. Several Scheduler replicas share theirs through the Redis
store in `state.py`, which keeps the same state in Redis and reuses this module's fitting (`refit_weights`).

Concurrency: the Scheduler calls this from one asyncio event loop. No method awaits, so calls never
interleave and no lock is needed; the write in autosave blocks the loop for its duration (see above). Do not
share an instance across threads.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

from ..core.files import write_atomically
from ..core.stats import clamp

log = logging.getLogger("deliberate.scheduler.weights")

# The state file's schema (module docstring): 3 keys the weights by signal name; 1 and 2 by the seed's names.
SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
GAMMA_IDLE = 0.01
GAMMA_SATURATED = 0.05
DEFAULT_GAMMA = 0.02

# The weights learned from feedback: signal name (as `selection` names it) -> default weight. The one
# declaration of what is learned: the stores keep, report and persist exactly these names.
LEARNED: dict[str, float] = {"score": 1.0, "agreement": 0.3, "answer_share": 0.3}

# The seed's names for the first three learned weights: the attributes of `Weights`, the keys of state files of
# schema 1 and 2, and the fields of the Redis weights hash (state.py). A signal added later has no seed name.
SEED_NAMES: dict[str, str] = {"score": "alpha", "agreement": "beta", "answer_share": "delta"}
_SEED_SIGNALS = {seed: name for name, seed in SEED_NAMES.items()}


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
                values[_SEED_SIGNALS[seed]] = value
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


@dataclass
class FeedbackCounters:
    submitted: int = 0  # every submit call: accepted + rejected + unknown_request
    accepted: int = 0
    rejected: int = 0
    unknown_request: int = 0  # never recorded, evicted, or already answered
    refits: int = 0  # windows that changed the weights
    refits_skipped: int = 0  # windows that carried no signal about α vs β (see `fit_weights`)
    evicted: int = 0  # pending decisions dropped, oldest first, to respect max_pending
    expired: int = 0  # pending decisions dropped after the pending TTL (the Redis store; the file store has none)
    save_failures: int = 0  # autosaves that could not be written (logged)


# --------------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------------


class WeightLearner:
    """Current weights, decisions awaiting feedback, outcomes since the last refit, and counters."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        refit_every: int = 100,
        blend: float = 0.3,
        max_pending: int = 10_000,
        autosave: bool = True,
    ):
        if refit_every < 1 or max_pending < 1 or not 0.0 <= blend <= 1.0:
            raise ValueError("refit_every and max_pending must be >= 1 and blend in [0, 1]")
        self.path = Path(path) if path is not None else None
        self.refit_every = refit_every
        self.blend = blend
        self.max_pending = max_pending
        self.autosave = autosave
        self.weights = Weights()
        self.counters = FeedbackCounters()
        self.pending: OrderedDict[str, DecisionFeatures] = OrderedDict()  # oldest first
        self.outcomes: list[Outcome] = []  # since the last refit
        self._dirty = False

    def weights_for_load(self, utilization: float) -> Weights:
        """The learned weights with γ for the current load."""
        return self.weights.with_gamma(gamma_for_load(utilization))

    def record(self, request_id: str, features: DecisionFeatures) -> None:
        """Remember what the answer to `request_id` was chosen on, until its feedback arrives."""
        if not request_id:
            raise ValueError("request_id must not be empty")
        self.pending.pop(request_id, None)  # a re-recorded request counts as the newest
        self.pending[request_id] = features
        while len(self.pending) > self.max_pending:
            self.pending.popitem(last=False)
            self.counters.evicted += 1
        self._changed()

    def submit(self, request_id: str, accepted: bool) -> bool:
        """Record the outcome of `request_id`'s answer; False (and counted) when no decision is pending for it.

        A decision takes one outcome: a second submit for the same request is refused as unknown.
        """
        self.counters.submitted += 1
        features = self.pending.pop(request_id, None)
        if features is None:
            self.counters.unknown_request += 1
            self._changed()
            return False
        if accepted:
            self.counters.accepted += 1
        else:
            self.counters.rejected += 1
        self.outcomes.append(Outcome(features, accepted))
        if len(self.outcomes) >= self.refit_every:
            self._refit()
        self._changed()
        return True

    def snapshot(self) -> dict:
        """What GetState reports."""
        return {
            "weights": self._learned_weights(),
            "counters": asdict(self.counters),
            "pending": len(self.pending),
            "outcomes_until_refit": max(self.refit_every - len(self.outcomes), 0),
        }

    def _learned_weights(self) -> dict[str, float]:
        return learned_weights(self.weights)

    def _refit(self) -> None:
        refitted = refit_weights(self.weights, self.outcomes, self.blend)
        self.outcomes = []
        if refitted is None:
            self.counters.refits_skipped += 1
        else:
            self.weights = refitted
            self.counters.refits += 1

    # ----------------------------------------------------------------------------------------------
    # Persistence
    # ----------------------------------------------------------------------------------------------

    def _changed(self) -> None:
        self._dirty = True
        if self.autosave:
            self.flush()

    def flush(self) -> None:
        """Write the state to `path` if it changed since the last write. Never raises: failures are logged."""
        if self.path is None or not self._dirty:
            return
        try:
            self.save(self.path)
        except Exception:  # a full disk must not fail the request; the state stays in memory and dirty
            self.counters.save_failures += 1
            log.exception("could not save scheduler weights to %s", self.path)

    def save(self, path: str | Path) -> None:
        """Write the whole state to `path` atomically: the file holds either the old state or the new one."""
        write_json_atomically(Path(path), self.to_json())
        if self.path is not None and Path(path) == self.path:
            self._dirty = False

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "weights": self._learned_weights(),
            "counters": asdict(self.counters),
            # Compact rows, oldest first: up to max_pending of them are rewritten on every change.
            "pending": [[request_id, *feature_row(features)] for request_id, features in self.pending.items()],
            "outcomes": [[*feature_row(o.features), o.accepted] for o in self.outcomes],
        }

    @classmethod
    def load(cls, path: str | Path, **options) -> WeightLearner:
        """The learner saved at `path`, bound to it for autosave; `options` as for the constructor.

        A missing file gives defaults. A file that cannot be read or understood is renamed aside to
        ``<path>.corrupt-<UTC timestamp>`` (kept for inspection, never overwritten) and defaults are used.
        """
        learner = cls(path, **options)
        try:
            learner._restore(json.loads(learner.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return learner
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            _set_aside(learner.path, f"{type(exc).__name__}: {exc}")
            return cls(path, **options)  # nothing half-restored
        return learner

    def _restore(self, data: dict) -> None:
        version = data.get("schema_version")
        if version not in READABLE_SCHEMA_VERSIONS:
            raise ValueError(f"unsupported schema_version {version!r}")
        self.weights = restored_weights(data["weights"], version)
        self.counters = FeedbackCounters(**{name: _as_count(value) for name, value in data["counters"].items()})
        for request_id, *row in data["pending"]:
            if not isinstance(request_id, str) or not request_id:
                raise ValueError(f"invalid request id {request_id!r}")
            self.pending[request_id] = features_from_row(row)
        for *row, accepted in data["outcomes"]:
            if not isinstance(accepted, bool):
                raise ValueError(f"invalid outcome {accepted!r}")
            self.outcomes.append(Outcome(features_from_row(row), accepted))
        # A smaller bound than the file was written with: keep the newest, as `record` would have.
        while len(self.pending) > self.max_pending:
            self.pending.popitem(last=False)
            self.counters.evicted += 1


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


def learned_weights(weights: Weights) -> dict[str, float]:
    """The learned weights by signal name, as GetState's snapshot and the file store report and keep them."""
    return dict(weights.by_signal)


def restored_weights(stored: Mapping[str, object], version: int = SCHEMA_VERSION) -> Weights:
    """Weights from a stored mapping; refuses values that are not finite and >= 0.

    Version 3 keys it by signal name; a declared name that is absent takes its default, and a name not declared
    (a newer version's signal) is ignored. Versions 1 and 2 key it by the seed's names: alpha and beta required,
    delta optional (version 1 has none).
    """
    if not isinstance(stored, Mapping):
        raise TypeError(f"weights must be a mapping, not {type(stored).__name__}")
    if version >= 3:
        learned = {name: float(stored[name]) for name in LEARNED if name in stored}
    else:
        seeds = ("alpha", "beta", *(("delta",) if "delta" in stored else ()))
        learned = {_SEED_SIGNALS[seed]: float(stored[seed]) for seed in seeds}
    if not all(math.isfinite(value) and value >= 0 for value in learned.values()):
        raise ValueError(f"invalid weights {learned}")
    return Weights(learned=learned)


def write_json_atomically(path: Path, data: dict) -> None:
    """Encode first (a value JSON cannot hold raises before anything is written), then `write_atomically`."""
    write_atomically(path, json.dumps(data, allow_nan=False, separators=(",", ":")).encode("utf-8"))


def feature_row(features: DecisionFeatures) -> list[float | None]:
    return [features.score, features.agreement, features.latency, features.answer_share]


def features_from_row(row: list) -> DecisionFeatures:
    """A stored row: [score, agreement, latency] (version 1) or [..., answer_share or null] (versions 2, 3)."""
    if len(row) == 3:
        return DecisionFeatures(float(row[0]), float(row[1]), float(row[2]))
    if len(row) == 4:
        share = None if row[3] is None else float(row[3])
        return DecisionFeatures(float(row[0]), float(row[1]), float(row[2]), share)
    raise ValueError(f"invalid decision row {row!r}")


def _set_aside(path: Path, reason: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    try:
        os.replace(path, aside)
    except OSError as exc:
        log.warning("scheduler weights file %s is %s; could not move it aside (%s); using defaults", path, reason, exc)
        return
    log.warning("scheduler weights file %s is %s; moved it to %s and using defaults", path, reason, aside)


def _as_count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"invalid counter value {value!r}")
    return value


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
