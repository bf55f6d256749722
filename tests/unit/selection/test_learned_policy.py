"""The learned selection policy: the shipped artefact is read and checked, `learned` ranks with its weights, and
`deliberate_bench.eval.fit_policy` fits weights that follow what separates right drafts from wrong ones."""

from __future__ import annotations

import json

import pytest

from deliberate.selection import POLICIES, Candidate, select
from deliberate.selection.confidence import ConfidenceSummary
from deliberate.selection.learned import SCHEMA_VERSION, parse, shipped
from deliberate_bench.eval import fit_policy


def test_the_shipped_artefact_is_valid_and_says_what_it_was_fitted_on():
    weights = shipped()
    assert weights.weights and all(isinstance(v, float | int) for v in weights.weights.values())
    assert weights.trained_on["runs"].endswith(".runs.jsonl") and len(weights.trained_on["sha256"]) == 64
    assert weights.trained_on["problems"] > 0
    assert weights.command.startswith("deliberate bench fit-policy ")
    assert "learned" in POLICIES and POLICIES["learned"].competitors == "valid"


def test_a_malformed_artefact_is_refused_naming_what_is_wrong():
    with pytest.raises(ValueError, match="schema"):
        parse({"schema": SCHEMA_VERSION + 1, "weights": {"score": 1.0}})
    with pytest.raises(ValueError, match="weights"):
        parse({"schema": SCHEMA_VERSION, "version": "x", "weights": {"score": "high"}, "command": ""})


def _confident(value: float) -> ConfidenceSummary:
    return ConfidenceSummary(tokens=50, mean_logprob=-0.2, min_window=value, last_window=value, answer=value)


def test_the_learned_policy_ranks_with_the_shipped_weights_not_the_deployments(monkeypatch):
    import deliberate.selection.policies as policies
    from deliberate.selection.learned import LearnedWeights

    fitted = LearnedWeights("test", {"confidence": 1.0}, {}, "")
    monkeypatch.setattr(policies, "shipped", lambda: fitted)
    hesitant = Candidate("hesitant", 0, True, 1.0, answer="5", evidence=("arithmetic",), confidence=_confident(2.0))
    sure = Candidate("sure", 1, True, 0.5, answer="6", evidence=("arithmetic",), confidence=_confident(9.0))
    assert select([hesitant, sure], policy="learned", weights={"score": 1.0}).selected[0].draft_id == "sure"
    assert select([hesitant, sure], policy="weighted", weights={"score": 1.0}).selected[0].draft_id == "hesitant"


def _draft(index: int, kind: str, answer: str, confidence: float) -> dict:
    return {
        "round": 0, "index": index, "kind": kind, "valid": True, "score": 1.0, "answer": answer,
        "evidence": ["arithmetic"], "components": {}, "text": "", "completion_tokens": 100, "finish_reason": "STOP",
        "confidence": {"tokens": 100, "mean_logprob": -0.3, "min_window": confidence, "last_window": confidence,
                       "answer": confidence, "window_tokens": 16, "top_k": 20},
    }  # fmt: skip


def test_fitting_on_drafts_where_confidence_separates_right_from_wrong_gives_confidence_a_positive_weight(tmp_path):
    records = []
    for problem in range(30):
        right, wrong = str(problem), str(problem + 1000)
        drafts = [_draft(i, "prose", right if i % 2 else wrong, 8.0 + (i % 2) + problem % 3 * 0.1) for i in range(4)]
        drafts += [_draft(4 + i, "program", wrong if i % 2 else right, 9.0 - (i % 2) * 2) for i in range(4)]
        records.append({"task": "gsm8k", "id": f"p{problem}", "gold": right, "solve": {"drafts": drafts}})
    runs = tmp_path / "tuning.runs.jsonl"
    runs.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "learned_policy.json"
    assert fit_policy.main([str(runs), "--drafts", "5:3+2", "--out", str(out)]) == 0
    artefact = parse(json.loads(out.read_text()))
    assert artefact.weights["confidence"] > 0
    assert artefact.trained_on["problems"] == 30 and artefact.trained_on["drafts"] == 150
    assert artefact.trained_on["draft_set"] == "5:3+2"
