"""Token confidence (selection/confidence.py): DeepConf's token confidence, window means, the answer line's
confidence, and the signals selection reads from them."""

from __future__ import annotations

import math

import pytest

from deliberate.selection import Candidate, signals
from deliberate.selection.confidence import (
    ConfidenceSummary,
    TokenTrace,
    answer_confidence,
    last_line_span,
    summarize,
    token_confidence,
    window_means,
)


def test_token_confidence_is_minus_the_mean_top_k_log_probability():
    assert token_confidence([-0.1, -5.0, -6.9]) == pytest.approx(4.0)
    assert token_confidence([-0.01, -0.7, -0.8]) < token_confidence([-0.01, -9.0, -10.0])  # hesitant < peaked
    assert token_confidence([-1.0, -math.inf]) == pytest.approx(1.0)  # an impossible candidate is left out
    assert token_confidence([]) == 0.0


def test_window_means_slide_one_token_at_a_time():
    assert window_means([1, 2, 3, 4, 5], window=2) == [1.5, 2.5, 3.5, 4.5]
    assert window_means([1, 2, 3], window=8) == [2.0]  # fewer tokens than a window: one window of all
    assert window_means([], window=4) == []


def test_summary_reads_the_lowest_and_the_last_window():
    trace = TokenTrace(logprobs=(-0.5,) * 6, confidences=(9, 9, 1, 1, 9, 9), ends=(1, 2, 3, 4, 5, 6))
    summary = summarize(trace, "abcdef", window=2)
    assert summary.tokens == 6 and summary.mean_logprob == pytest.approx(-0.5)
    assert summary.min_window == 1.0 and summary.last_window == 9.0
    assert summarize(TokenTrace((), (), ()), "") is None


def test_answer_confidence_reads_the_last_line_that_is_not_a_fence():
    text = "Step one.\nFinal answer: 42\n```\n"
    #        ^9         ^10..26             the last line holds only a fence
    assert last_line_span(text) == (10, 26)
    trace = TokenTrace(logprobs=(-1.0,) * 3, confidences=(2.0, 6.0, 8.0), ends=(9, 22, 26))
    assert answer_confidence(trace, text) == pytest.approx(7.0)  # the two tokens of the answer line
    assert last_line_span("```python\n\n```") is None
    assert answer_confidence(trace, "") is None


def test_a_trace_shifted_past_a_prefill_keeps_its_tokens_on_their_text():
    trace = TokenTrace((-1.0,), (3.0,), (4,)).shifted(len("```python\n"))
    assert trace.ends == (14,)


def _candidate(index: int, confidence: ConfidenceSummary | None, tokens: int = 100) -> Candidate:
    return Candidate(f"d{index}", index, True, 0.8, answer="7", completion_tokens=tokens, confidence=confidence)


def test_confidence_signals_read_the_summary_and_are_zero_without_one():
    summary = ConfidenceSummary(tokens=10, mean_logprob=-0.3, min_window=4.0, last_window=6.0, answer=None)
    table = signals.compute([_candidate(0, summary, tokens=50), _candidate(1, None, tokens=100)])
    assert table["d0"]["confidence"] == 4.0 and table["d0"]["tail_confidence"] == 6.0
    assert table["d0"]["mean_logprob"] == -0.3 and table["d0"]["answer_confidence"] == 0.0  # no answer line
    assert table["d1"]["confidence"] == 0.0 and table["d1"]["mean_logprob"] == 0.0
    assert table["d0"]["length"] == 0.5 and table["d1"]["length"] == 1.0
