"""Scheduler weights: the final-score formula, γ from load (weights.py), learning α/β/δ from feedback, and crash-safe
persistence (weight_learner.py)."""

import json
import logging
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deliberate.scheduler.learning import weight_learner, weights
from deliberate.scheduler.learning.weight_learner import WeightLearner
from deliberate.scheduler.learning.weights import (
    WEIGHT_SUM,
    DecisionFeatures,
    Outcome,
    Weights,
    final_score,
    fit_weights,
    gamma_for_load,
    latency_fraction,
    score_spread,
)


def feed(learner: WeightLearner, rng: random.Random, count: int, accepted_when) -> None:
    """Record and answer `count` synthetic decisions; `accepted_when(features)` decides each outcome."""
    for _ in range(count):
        features = DecisionFeatures(score=rng.uniform(0.0, 1.0), agreement=rng.uniform(0.5, 1.0), latency=0.1)
        request_id = f"req-{rng.getrandbits(64):016x}"
        learner.record(request_id, features)
        assert learner.submit(request_id, accepted_when(features))


def noisy(rng: random.Random, outcome: bool) -> bool:
    return outcome if rng.random() > 0.1 else not outcome


# --------------------------------------------------------------------------------------------------
# The formula
# --------------------------------------------------------------------------------------------------


def test_final_score_is_alpha_score_plus_beta_agreement_minus_gamma_latency():
    w = Weights(alpha=1.0, beta=0.3, gamma=0.02)
    assert final_score(0.8, 0.1, 0.5, w) == pytest.approx(1.0 * 0.8 + 0.3 * 0.9 - 0.02 * 0.5)
    assert final_score(1.0, 0.0, 0.0, w) == pytest.approx(1.3)
    assert final_score(0.0, 0.0, 1.0, Weights(alpha=2.0, beta=0.0, gamma=0.05)) == pytest.approx(-0.05)


def test_answer_share_adds_delta_times_the_share():
    w = Weights(alpha=1.0, beta=0.3, gamma=0.02, delta=0.4)
    assert final_score(0.8, 0.1, 0.5, w, answer_share=0.75) == pytest.approx(
        1.0 * 0.8 + 0.3 * 0.9 + 0.4 * 0.75 - 0.02 * 0.5
    )
    assert final_score(0.8, 0.1, 0.5, w) == pytest.approx(1.0 * 0.8 + 0.3 * 0.9 - 0.02 * 0.5)  # share 0 by default


def test_default_weights():
    assert Weights() == Weights(alpha=1.0, beta=0.3, gamma=0.02, delta=0.3)
    assert WEIGHT_SUM == pytest.approx(1.6)


def test_slower_draft_loses_a_tie_and_more_so_under_load():
    idle, busy = Weights(gamma=gamma_for_load(0.0)), Weights(gamma=gamma_for_load(1.0))
    fast, slow = (0.9, 0.1, 0.1), (0.9, 0.1, 0.9)
    assert final_score(*fast, idle) > final_score(*slow, idle)
    gap_idle = final_score(*fast, idle) - final_score(*slow, idle)
    gap_busy = final_score(*fast, busy) - final_score(*slow, busy)
    assert gap_busy == pytest.approx(5 * gap_idle)


@pytest.mark.parametrize(
    ("utilization", "gamma"),
    [(0.0, 0.01), (1.0, 0.05), (0.5, 0.03), (0.25, 0.02), (-3.0, 0.01), (7.0, 0.05)],
)
def test_gamma_follows_load_linearly_and_is_clamped(utilization, gamma):
    assert gamma_for_load(utilization) == pytest.approx(gamma)


@given(st.floats(allow_nan=False))
def test_gamma_always_within_bounds(utilization):
    assert 0.01 <= gamma_for_load(utilization) <= 0.05


def test_spread_and_latency_helpers():
    assert score_spread([0.7]) == 0.0
    assert score_spread([0.5, 1.0]) == pytest.approx(0.25)  # population stddev
    assert latency_fraction(1.5, 3.0) == pytest.approx(0.5)
    assert latency_fraction(9.0, 3.0) == 1.0
    assert latency_fraction(-1.0, 3.0) == 0.0
    assert latency_fraction(1.0, 0.0) == 1.0


def test_non_finite_features_are_refused():
    with pytest.raises(ValueError):
        DecisionFeatures(score=float("nan"), agreement=1.0, latency=0.0)


def test_weights_are_a_vector_named_by_signal_with_the_seed_names_as_views():
    w = Weights(alpha=0.9, beta=0.2, gamma=0.04, delta=0.5)
    assert w.by_signal == {"score": 0.9, "agreement": 0.2, "answer_share": 0.5}
    assert (w.alpha, w.beta, w.gamma, w.delta) == (0.9, 0.2, 0.04, 0.5)
    assert w.learned == (0.9, 0.2, 0.5)
    assert w.vector() == {"score": 0.9, "agreement": 0.2, "answer_share": 0.5, "latency": -0.04}
    assert w == Weights(gamma=0.04, learned={"score": 0.9, "agreement": 0.2, "answer_share": 0.5})
    assert hash(w) == hash(Weights(gamma=0.04, learned=dict(w.by_signal)))
    assert w.with_gamma(0.01) == Weights(alpha=0.9, beta=0.2, gamma=0.01, delta=0.5)
    assert w.with_learned({"agreement": 0.3}).beta == 0.3
    assert Weights(learned={"score": 2.0}) == Weights(alpha=2.0)  # the others take their defaults
    assert Weights().by_signal == weights.LEARNED
    with pytest.raises(ValueError, match="not a learned weight"):
        Weights(learned={"latency": 1.0})  # γ is not learned
    with pytest.raises(TypeError):
        w.by_signal["score"] = 0.0  # read-only


def test_weights_for_load_keeps_learned_alpha_beta():
    learner = WeightLearner()
    w = learner.weights_for_load(1.0)
    assert (w.alpha, w.beta, w.gamma) == (1.0, 0.3, pytest.approx(0.05))


# --------------------------------------------------------------------------------------------------
# Feedback and learning
# --------------------------------------------------------------------------------------------------


def test_unknown_request_is_counted_and_refused():
    learner = WeightLearner()
    assert learner.submit("never-recorded", True) is False
    learner.record("r1", DecisionFeatures(0.9, 1.0, 0.1))
    assert learner.submit("r1", True) is True
    assert learner.submit("r1", False) is False  # one outcome per decision
    counters = learner.snapshot()["counters"]
    assert counters["submitted"] == 3
    assert counters["accepted"] == 1
    assert counters["rejected"] == 0
    assert counters["unknown_request"] == 2


def test_refit_happens_exactly_every_100_outcomes():
    learner, rng = WeightLearner(), random.Random(1)
    feed(learner, rng, 99, lambda f: f.agreement > 0.75)
    assert learner.snapshot()["counters"]["refits"] == 0
    assert learner.snapshot()["outcomes_until_refit"] == 1
    assert learner.weights == Weights()
    feed(learner, rng, 1, lambda f: f.agreement > 0.75)
    assert learner.snapshot()["counters"]["refits"] == 1
    assert learner.snapshot()["outcomes_until_refit"] == 100
    assert learner.weights != Weights()
    feed(learner, rng, 99, lambda f: f.agreement > 0.75)
    assert learner.snapshot()["counters"]["refits"] == 1
    feed(learner, rng, 1, lambda f: f.agreement > 0.75)
    assert learner.snapshot()["counters"]["refits"] == 2


def test_refused_feedback_does_not_count_toward_a_refit():
    learner = WeightLearner(refit_every=2)
    for _ in range(5):
        learner.submit("unknown", True)
    assert learner.snapshot()["outcomes_until_refit"] == 2


def test_beta_grows_when_agreement_predicts_acceptance():
    learner, rng = WeightLearner(), random.Random(7)
    initial = learner.weights.beta / learner.weights.alpha
    for _ in range(4):
        feed(learner, rng, 100, lambda f: noisy(rng, f.agreement > 0.75))
    assert learner.weights.beta / learner.weights.alpha > 3 * initial
    assert sum(learner.weights.learned) == pytest.approx(WEIGHT_SUM)
    assert learner.weights.gamma == Weights().gamma  # never learned
    assert learner.weights.delta == Weights().delta  # answer_share was not recorded: δ is not fitted


def test_alpha_grows_when_score_predicts_acceptance():
    # Slower than the opposite case: agreement spans half the range of score, so the noise in its fitted
    # coefficient is doubled on the raw scale; the EWMA averages it out over refits.
    learner, rng = WeightLearner(), random.Random(11)
    initial = learner.weights.alpha / learner.weights.beta
    for _ in range(6):
        feed(learner, rng, 100, lambda f: noisy(rng, f.score > 0.5))
    assert learner.weights.alpha / learner.weights.beta > 1.5 * initial
    assert sum(learner.weights.learned) == pytest.approx(WEIGHT_SUM)


def feed_with_share(learner: WeightLearner, rng: random.Random, count: int, accepted_when) -> None:
    for i in range(count):
        features = DecisionFeatures(
            score=rng.uniform(0.0, 1.0), agreement=rng.uniform(0.5, 1.0), latency=0.1, answer_share=rng.uniform(0, 1)
        )
        learner.record(f"s{i}-{rng.getrandbits(32)}", features)
        assert learner.submit(next(reversed(learner.pending)), accepted_when(features))


def test_delta_grows_when_answer_share_predicts_acceptance():
    learner, rng = WeightLearner(), random.Random(17)
    for _ in range(4):
        feed_with_share(learner, rng, 100, lambda f: noisy(rng, f.answer_share > 0.5))
    assert learner.weights.delta > 2 * Weights().delta
    assert learner.weights.delta > learner.weights.beta
    assert sum(learner.weights.learned) == pytest.approx(WEIGHT_SUM)


def test_a_feature_that_did_not_vary_keeps_its_weight_while_the_others_are_fitted():
    rng = random.Random(19)
    outcomes = []
    for _ in range(200):
        features = DecisionFeatures(rng.uniform(0, 1), rng.uniform(0.5, 1), 0.0, answer_share=1.0)
        outcomes.append(Outcome(features, noisy(rng, features.score > 0.5)))
    current = Weights(alpha=0.5, beta=0.5, delta=0.6)
    fitted = fit_weights(outcomes, current)
    assert fitted is not None
    assert fitted.delta == 0.6  # constant answer share: undetermined, kept
    assert fitted.alpha + fitted.beta == pytest.approx(1.0)  # the two fitted weights share what they had
    assert fitted.alpha > 0.9


def test_one_fittable_feature_is_no_signal():
    rng = random.Random(23)
    outcomes = [
        Outcome(DecisionFeatures(score, 1.0, 0.0), noisy(rng, score > 0.5))
        for score in (rng.uniform(0, 1) for _ in range(100))
    ]
    assert fit_weights(outcomes) is None  # agreement constant, answer_share unrecorded: nothing to split


def test_each_refit_moves_weights_by_the_blend_factor_only():
    learner, rng = WeightLearner(), random.Random(3)
    feed(learner, rng, 100, lambda f: f.agreement > 0.75)  # agreement decides everything: fitted β ≈ WEIGHT_SUM
    # new = 0.7·old + 0.3·fitted, so β can at most reach 0.7·0.3 + 0.3·1.3 = 0.6.
    assert 0.5 < learner.weights.beta <= 0.6 + 1e-9


def test_a_window_without_signal_leaves_weights_alone():
    learner, rng = WeightLearner(), random.Random(5)
    feed(learner, rng, 100, lambda f: True)  # everything accepted: nothing to tell score from agreement
    snapshot = learner.snapshot()
    assert learner.weights == Weights()
    assert snapshot["counters"]["refits"] == 0
    assert snapshot["counters"]["refits_skipped"] == 1
    assert snapshot["outcomes_until_refit"] == 100


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0.5, 1), st.booleans()), min_size=10, max_size=60))
def test_learned_weights_stay_positive_on_a_stable_scale(samples):
    learner = WeightLearner(refit_every=10)
    for i, (score, agreement, accepted) in enumerate(samples):
        learner.record(f"r{i}", DecisionFeatures(score, agreement, 0.0))
        learner.submit(f"r{i}", accepted)
    assert min(learner.weights.learned) >= 0
    assert sum(learner.weights.learned) == pytest.approx(WEIGHT_SUM)


def test_pending_is_bounded_dropping_the_oldest():
    learner = WeightLearner(max_pending=3)
    for i in range(5):
        learner.record(f"r{i}", DecisionFeatures(0.5, 1.0, 0.0))
    assert list(learner.pending) == ["r2", "r3", "r4"]
    assert learner.snapshot()["counters"]["evicted"] == 2
    assert learner.submit("r0", True) is False
    learner.record("r2", DecisionFeatures(0.6, 1.0, 0.0))  # re-recorded: now the newest
    learner.record("r5", DecisionFeatures(0.5, 1.0, 0.0))
    assert list(learner.pending) == ["r4", "r2", "r5"]


# --------------------------------------------------------------------------------------------------
# Persistence
# --------------------------------------------------------------------------------------------------


def test_everything_survives_a_restart(tmp_path):
    path = tmp_path / "weights.json"
    learner, rng = WeightLearner.load(path), random.Random(13)
    feed(learner, rng, 150, lambda f: noisy(rng, f.agreement > 0.75))
    learner.submit("unknown", True)
    learner.record("before-restart", DecisionFeatures(0.8, 0.9, 0.2))
    before = learner.snapshot()

    restarted = WeightLearner.load(path)  # no explicit save: every record/submit already persisted

    assert restarted.snapshot() == before
    assert restarted.weights == learner.weights
    assert restarted.pending == learner.pending
    assert restarted.outcomes == learner.outcomes
    assert restarted.submit("before-restart", True) is True
    feed(restarted, rng, 49, lambda f: noisy(rng, f.agreement > 0.75))
    assert restarted.snapshot()["counters"]["refits"] == 2  # the 50 outcomes from before the restart count


def test_explicit_save_and_load_round_trip(tmp_path):
    learner = WeightLearner()
    learner.record("r1", DecisionFeatures(0.4, 0.7, 0.3))
    learner.save(tmp_path / "state.json")
    data = json.loads((tmp_path / "state.json").read_text())
    assert data["schema_version"] == weight_learner.SCHEMA_VERSION
    assert WeightLearner.load(tmp_path / "state.json").snapshot() == learner.snapshot()


def test_answer_share_and_delta_survive_a_restart(tmp_path):
    path = tmp_path / "weights.json"
    learner, rng = WeightLearner.load(path), random.Random(29)
    feed_with_share(learner, rng, 100, lambda f: noisy(rng, f.answer_share > 0.5))
    learner.record("pending", DecisionFeatures(0.5, 0.9, 0.1, answer_share=0.6))

    restarted = WeightLearner.load(path)

    assert restarted.weights.delta == learner.weights.delta != Weights().delta
    assert restarted.pending["pending"].answer_share == 0.6
    assert json.loads(path.read_text())["weights"]["answer_share"] == learner.weights.delta


def test_a_version_1_file_without_delta_still_loads(tmp_path):
    path = tmp_path / "weights.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "weights": {"alpha": 0.9, "beta": 0.4},
                "counters": {"submitted": 3, "accepted": 2, "rejected": 1},
                "pending": [["old", 0.7, 0.8, 0.1]],
                "outcomes": [[0.7, 0.8, 0.1, True]],
            }
        )
    )

    learner = WeightLearner.load(path)

    assert (learner.weights.alpha, learner.weights.beta, learner.weights.delta) == (0.9, 0.4, Weights().delta)
    assert learner.pending["old"] == DecisionFeatures(0.7, 0.8, 0.1, answer_share=None)
    assert learner.outcomes == [Outcome(DecisionFeatures(0.7, 0.8, 0.1), True)]
    assert learner.counters.accepted == 2
    assert not list(tmp_path.glob("weights.json.corrupt-*"))
    learner.record("new", DecisionFeatures(0.5, 0.9, 0.0, answer_share=1.0))  # rewritten as the new version
    rewritten = json.loads(path.read_text())
    assert rewritten["schema_version"] == weight_learner.SCHEMA_VERSION == 3
    assert rewritten["weights"] == {"score": 0.9, "agreement": 0.4, "answer_share": Weights().delta}


def test_a_version_2_file_with_seed_names_still_loads(tmp_path):
    path = tmp_path / "weights.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 2,
                "weights": {"alpha": 0.9, "beta": 0.4, "delta": 0.5},
                "counters": {"submitted": 2, "accepted": 1, "rejected": 1},
                "pending": [["old", 0.7, 0.8, 0.1, 0.6], ["unshared", 0.7, 0.8, 0.1, None]],
                "outcomes": [[0.7, 0.8, 0.1, 0.25, False]],
            }
        )
    )

    learner = WeightLearner.load(path)

    assert learner.weights == Weights(alpha=0.9, beta=0.4, delta=0.5)
    assert learner.pending["old"] == DecisionFeatures(0.7, 0.8, 0.1, answer_share=0.6)
    assert learner.pending["unshared"].answer_share is None
    assert learner.outcomes == [Outcome(DecisionFeatures(0.7, 0.8, 0.1, 0.25), False)]
    assert not list(tmp_path.glob("weights.json.corrupt-*"))
    learner.submit("old", True)  # rewritten as version 3, keyed by signal name
    rewritten = json.loads(path.read_text())
    assert rewritten["schema_version"] == 3
    assert rewritten["weights"] == {"score": 0.9, "agreement": 0.4, "answer_share": 0.5}
    assert WeightLearner.load(path).snapshot() == learner.snapshot()


def test_a_version_3_file_is_keyed_by_signal_name(tmp_path):
    """A declared weight the file lacks takes its default; a name this version does not declare (a newer
    version's signal, after a rollback) is ignored."""
    path = tmp_path / "weights.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 3,
                "weights": {"score": 0.7, "agreement": 0.6, "length": 0.1},
                "counters": {},
                "pending": [],
                "outcomes": [],
            }
        )
    )
    learner = WeightLearner.load(path)
    assert learner.weights.by_signal == {"score": 0.7, "agreement": 0.6, "answer_share": Weights().delta}
    assert not list(tmp_path.glob("weights.json.corrupt-*"))


def test_a_learned_signal_added_to_the_declaration_is_kept_fitted_around_and_persisted(tmp_path, monkeypatch):
    monkeypatch.setitem(weights.LEARNED, "evidence", 0.2)
    path = tmp_path / "weights.json"
    learner, rng = WeightLearner.load(path), random.Random(41)
    assert learner.weights.vector()["evidence"] == 0.2  # the weighted policy weighs it at its default
    feed_with_share(learner, rng, 100, lambda f: noisy(rng, f.answer_share > 0.5))

    assert learner.snapshot()["counters"]["refits"] == 1
    assert learner.weights.by_signal["evidence"] == 0.2  # never recorded by a decision: not fitted, kept
    assert sum(learner.weights.learned) == pytest.approx(WEIGHT_SUM + 0.2)
    assert json.loads(path.read_text())["weights"]["evidence"] == 0.2
    stored = json.loads(path.read_text())
    stored["weights"]["evidence"] = 0.35
    path.write_text(json.dumps(stored))
    assert WeightLearner.load(path).weights.by_signal["evidence"] == 0.35


def test_missing_file_gives_defaults(tmp_path):
    learner = WeightLearner.load(tmp_path / "absent" / "weights.json")
    assert learner.weights == Weights()
    assert learner.snapshot()["pending"] == 0
    learner.record("r1", DecisionFeatures(0.5, 1.0, 0.0))  # creates the directory and the file
    assert (tmp_path / "absent" / "weights.json").exists()


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "",
        "[]",
        '{"schema_version": 99, "weights": {"alpha": 1, "beta": 0.3}, "counters": {}, "pending": [], "outcomes": []}',
        '{"schema_version": 1, "weights": {"alpha": -1, "beta": 0.3}, "counters": {}, "pending": [], "outcomes": []}',
        '{"schema_version": 1, "weights": {"alpha": 1, "beta": 0.3}, "counters": {"bogus": 1}, "pending": [],'
        ' "outcomes": []}',
        '{"schema_version": 1, "weights": {"alpha": 1, "beta": 0.3}, "counters": {}, "pending": [["r", 1]],'
        ' "outcomes": []}',
        '{"schema_version": 2, "weights": {"alpha": 1, "beta": 0.3, "delta": -0.1}, "counters": {}, "pending": [],'
        ' "outcomes": []}',
        '{"schema_version": 2, "weights": {"alpha": 1, "beta": 0.3, "delta": 0.3}, "counters": {},'
        ' "pending": [["r", 1, 1, 0, 0.5, 9]], "outcomes": []}',
        '{"schema_version": 2, "weights": {"alpha": 1, "delta": 0.3}, "counters": {}, "pending": [], "outcomes": []}',
        '{"schema_version": 3, "weights": {"score": 1, "agreement": -0.3}, "counters": {}, "pending": [],'
        ' "outcomes": []}',
        '{"schema_version": 3, "weights": {"score": "many"}, "counters": {}, "pending": [], "outcomes": []}',
        '{"schema_version": 3, "weights": [1, 0.3, 0.3], "counters": {}, "pending": [], "outcomes": []}',
    ],
)
def test_corrupt_file_is_set_aside_and_defaults_used(tmp_path, caplog, content):
    path = tmp_path / "weights.json"
    path.write_text(content)
    with caplog.at_level(logging.WARNING, logger="deliberate.scheduler.weights"):
        learner = WeightLearner.load(path)
    assert learner.weights == Weights()
    assert learner.snapshot()["pending"] == 0
    assert not path.exists()
    [aside] = tmp_path.glob("weights.json.corrupt-*")
    assert aside.read_text() == content  # kept for inspection
    assert "moved it to" in caplog.text


def test_invalid_utf8_is_set_aside(tmp_path):
    path = tmp_path / "weights.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert WeightLearner.load(path).weights == Weights()
    assert len(list(tmp_path.glob("weights.json.corrupt-*"))) == 1


def saved_learner(tmp_path):
    path = tmp_path / "weights.json"
    learner = WeightLearner.load(path)
    learner.record("r1", DecisionFeatures(0.5, 1.0, 0.0))
    return path, learner, path.read_bytes()


def test_failed_rename_leaves_old_file_intact(tmp_path, monkeypatch):
    path, learner, before = saved_learner(tmp_path)

    def crash(*args):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(weight_learner.os, "replace", crash)
    with pytest.raises(OSError):
        learner.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["weights.json"]  # no temp file left behind


def test_failed_encoding_leaves_old_file_intact(tmp_path, monkeypatch):
    path, learner, before = saved_learner(tmp_path)

    def crash(*args, **kwargs):
        raise ValueError("simulated encoder failure")

    monkeypatch.setattr(weight_learner.json, "dumps", crash)
    with pytest.raises(ValueError):
        learner.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["weights.json"]


def test_failed_fsync_leaves_old_file_intact(tmp_path, monkeypatch):
    path, learner, before = saved_learner(tmp_path)

    def crash(fd):
        raise OSError("simulated disk failure")

    monkeypatch.setattr(weight_learner.os, "fsync", crash)
    with pytest.raises(OSError):
        learner.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["weights.json"]


def test_autosave_failure_is_logged_not_raised_and_retried(tmp_path, monkeypatch, caplog):
    path, learner, before = saved_learner(tmp_path)
    real_replace = weight_learner.os.replace

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(weight_learner.os, "replace", crash)
    with caplog.at_level(logging.ERROR, logger="deliberate.scheduler.weights"):
        assert learner.submit("r1", True) is True  # the request is not failed by the disk
    assert learner.snapshot()["counters"]["save_failures"] == 1
    assert path.read_bytes() == before
    assert "could not save" in caplog.text

    monkeypatch.setattr(weight_learner.os, "replace", real_replace)
    learner.flush()  # still dirty: the next write catches up
    assert WeightLearner.load(path).snapshot()["counters"]["accepted"] == 1


def test_without_autosave_only_flush_writes(tmp_path):
    path = tmp_path / "weights.json"
    learner = WeightLearner.load(path, autosave=False)
    learner.record("r1", DecisionFeatures(0.5, 1.0, 0.0))
    assert not path.exists()
    learner.flush()
    assert WeightLearner.load(path).snapshot() == learner.snapshot()
