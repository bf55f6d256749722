"""The learned-weight store of one process: `WeightLearner` keeps the current weights, the decisions awaiting
feedback and the outcomes since the last refit, and persists them to a state file. Pure domain code, no gRPC. What the
weights are, and how they are fitted: `weights`.

At solve time the Scheduler records what it knew about the chosen answer (`record`); a later ``SubmitFeedback``
says whether that answer was accepted (`submit`); every ``refit_every`` outcomes the weights are refitted
(`weights.refit_weights`).

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
store in `weight_store.py`, which keeps the same state in Redis and reuses the same fitting
(`weights.refit_weights`).

Concurrency: the Scheduler calls this from one asyncio event loop. No method awaits, so calls never
interleave and no lock is needed; the write in autosave blocks the loop for its duration (see above). Do not
share an instance across threads.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from ...core.files import write_atomically
from .weights import LEARNED, SEED_SIGNALS, DecisionFeatures, Outcome, Weights, gamma_for_load, refit_weights

log = logging.getLogger("deliberate.scheduler.weights")  # one logger for the weights, fitted or stored

# The state file's schema (module docstring): 3 keys the weights by signal name; 1 and 2 by the seed's names.
SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = (1, 2, 3)


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
        learned = {SEED_SIGNALS[seed]: float(stored[seed]) for seed in seeds}
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
