"""The replay behind `deliberate bench confidence-stop`: thresholds come from right drafts of the calibration runs,
and a draft stops at the first full window whose mean confidence falls below its kind's threshold."""

from deliberate_bench.replays.confidence_stop import MIN_TOKENS, replay, stop_point, thresholds


def test_a_draft_stops_at_the_first_full_window_below_the_threshold_never_before_the_minimum():
    steady = [8.0] * 100
    assert stop_point(steady, floor=5.0) is None
    dip = [8.0] * 50 + [1.0] * 30 + [8.0] * 20
    stopped = stop_point(dip, floor=5.0)
    assert stopped is not None and 50 < stopped <= 80  # inside the dip, once the window's mean falls under 5
    early_dip = [1.0] * 20 + [8.0] * 80
    assert stop_point(early_dip, floor=5.0) in (None, MIN_TOKENS)  # nothing is judged before the minimum


def _draft(index: int, kind: str, answer: str, series: list[float]) -> dict:
    confidence = {"token_confidences": series}
    return {"round": 0, "index": index, "kind": kind, "answer": answer, "completion_tokens": len(series),
            "confidence": confidence}  # fmt: skip


def test_thresholds_read_right_drafts_only_and_stopping_hesitant_wrong_drafts_saves_tokens_without_losing_the_vote():
    record = {
        "gold": "7",
        "solve": {
            "drafts": [
                _draft(0, "prose", "7", [8.0] * 60),
                _draft(1, "prose", "7", [7.0] * 60),
                _draft(2, "prose", "9", [8.0] * 20 + [1.0] * 40),  # wrong and hesitant
                _draft(3, "program", "7", [9.0] * 40),
            ]
        },
    }
    limits = thresholds([record], q=0)  # the lowest right draft's lowest window, per kind
    assert limits == {"prose": 7.0, "program": 9.0}
    result = replay([record], {"prose": 5.0, "program": 5.0})
    assert result["drafts_stopped"] == 1 and result["right_drafts_stopped"] == 0
    assert result["token_ratio"] < 1.0
    assert result["vote_right_with"] == result["vote_right_without"] == 1
