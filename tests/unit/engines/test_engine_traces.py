"""Per-token traces (token confidence) of the engines that run without a model here: the vLLM engine's reading of
vLLM's log-probabilities, on objects shaped like vLLM's (vLLM itself runs in `make test-vllm`, tests/vllm), and the
recorded engine's replay of recorded traces."""

from __future__ import annotations

import itertools
import json
import sys
import threading
import types
from types import SimpleNamespace

import pytest

from deliberate.engines import SamplingParams, TextDelta
from deliberate.engines.base import Cancellation, EngineError, TraceBuilder
from deliberate.engines.recorded_engine import RecordedEngine
from deliberate.engines.vllm_engine import VllmEngine, add_token_logprobs
from deliberate.selection.confidence import TokenTrace

# --- vLLM -----------------------------------------------------------------------------------------------------


def _logprob(value: float, rank: int) -> SimpleNamespace:
    """A vllm.logprobs.Logprob."""
    return SimpleNamespace(logprob=value, rank=rank, decoded_token=None)


def _position(sampled: int, ranking: list[tuple[int, float]], top_k: int) -> dict:
    """One position of vLLM's sample logprobs, built as vllm.logprobs.append_logprobs_for_next_position does: the
    sampled token with its vocabulary rank, then the top-k, ranks 1..k (overwriting the sampled one's entry)."""
    rank = next(i for i, (token, _) in enumerate(ranking, 1) if token == sampled)
    entries = {sampled: _logprob(ranking[rank - 1][1], rank)}
    entries |= {token: _logprob(value, i) for i, (token, value) in enumerate(ranking[:top_k], 1)}
    return entries


# Three tokens: "He" (first choice), "llo" (second), "!" (fourth: outside a top-2).
SCRIPT = [
    (10, "He", [(10, -0.1), (20, -2.5), (21, -3.0)]),
    (11, "llo", [(30, -0.5), (11, -1.0), (31, -2.0)]),
    (12, "!", [(40, -0.2), (41, -2.2), (42, -3.0), (12, -4.0)]),
]


def test_vllm_logprobs_give_the_sampled_tokens_and_the_top_k_ones():
    token_ids = [token for token, _, _ in SCRIPT]
    logprobs = [_position(token, ranking, 2) for token, _, ranking in SCRIPT]
    trace = TraceBuilder()

    assert add_token_logprobs(trace, token_ids[:1], logprobs[:1], 0, 2, 2) == 1  # the first step
    assert add_token_logprobs(trace, token_ids, logprobs, 1, 2, 6) == 3  # then two tokens at once
    assert add_token_logprobs(trace, token_ids, logprobs, 3, 2, 6) == 3  # nothing new

    assert trace.logprobs == [-0.1, -1.0, -4.0]
    assert trace.confidences == pytest.approx([1.3, 0.75, 1.2])  # "!" (rank 4) is not among the top 2
    assert trace.ends == [2, 6, 6]


def test_a_vllm_position_without_its_sampled_token_is_left_out():
    trace = TraceBuilder()
    position = {7: _logprob(-0.5, 1)}
    assert add_token_logprobs(trace, [8, 7], ({7: _logprob(-0.5, 1)}, position), 0, 1, 3) == 2
    assert (trace.logprobs, trace.ends) == ([-0.5], [3])


class _FakeLLMEngine:
    """vllm.LLMEngine as VllmEngine uses it: each step adds the next SCRIPT token to every running request and
    returns cumulative RequestOutputs."""

    def __init__(self, max_logprobs: int = 20):
        self.vllm_config = SimpleNamespace(
            scheduler_config=SimpleNamespace(max_num_seqs=4), model_config=SimpleNamespace(max_logprobs=max_logprobs)
        )
        self.requests: dict[str, dict] = {}
        self.sampling: list = []

    def get_tokenizer(self):
        return SimpleNamespace(encode=lambda text, add_special_tokens: list(range(len(text.split()))))

    def add_request(self, request_id, engine_input, sampling) -> None:
        self.sampling.append(sampling)
        self.requests[request_id] = {"sampling": sampling, "done": 0}

    def abort_request(self, request_ids) -> None:
        for request_id in request_ids:
            self.requests.pop(request_id, None)

    def step(self) -> list:
        outputs = []
        for request_id, request in list(self.requests.items()):
            request["done"] += 1
            script = SCRIPT[: request["done"]]
            k = request["sampling"].logprobs
            logprobs = None if k is None else [_position(token, ranking, k) for token, _, ranking in script]
            finished = request["done"] == len(SCRIPT)
            sequence = SimpleNamespace(
                text="".join(text for _, text, _ in script),
                token_ids=[token for token, _, _ in script],
                logprobs=logprobs,
                finish_reason="stop" if finished else None,
            )
            outputs.append(SimpleNamespace(request_id=request_id, finished=finished, outputs=[sequence]))
            if finished:
                del self.requests[request_id]
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch):
    """The `vllm` module the engine imports, with only SamplingParams."""
    module = types.ModuleType("vllm")
    module.SamplingParams = lambda **options: SimpleNamespace(**options)
    monkeypatch.setitem(sys.modules, "vllm", module)


def test_the_vllm_engine_asks_for_logprobs_and_traces_each_sequence(fake_vllm):
    backend = _FakeLLMEngine()
    engine = VllmEngine(backend)
    params = SamplingParams(max_new_tokens=8, top_logprobs=2)
    completions = engine.generate(["one", "two words"], params, lambda e: None, threading.Event())

    assert [s.logprobs for s in backend.sampling] == [2, 2]
    for completion in completions:
        assert completion.text == "Hello!"
        assert completion.trace == TokenTrace((-0.1, -1.0, -4.0), pytest.approx((1.3, 0.75, 1.2)), (2, 5, 6))

    [plain] = engine.generate(["one"], SamplingParams(max_new_tokens=8), lambda e: None, threading.Event())
    assert backend.sampling[-1].logprobs is None and plain.trace is None


def test_the_vllm_engine_asks_no_more_candidates_than_it_allows(fake_vllm):
    backend = _FakeLLMEngine(max_logprobs=1)
    engine = VllmEngine(backend)
    [completion] = engine.generate(["one"], SamplingParams(top_logprobs=20), lambda e: None, threading.Event())
    assert backend.sampling[0].logprobs == 1
    assert completion.trace.confidences == pytest.approx((0.1, 0.5, 0.2))  # the best candidate alone


# --- The recorded engine --------------------------------------------------------------------------------------

QUESTION = "What is 6 * 7?"
TEXT = "Six times seven.\nFinal answer: 42"
# A token per word, as an engine would have traced the text (ends in it); the record's text has a leading space.
ENDS = [3, 9, 17, 22, 30, 33]
CONFIDENCE = {
    "tokens": 6,
    "mean_logprob": -0.3,
    "token_logprobs": [-0.1, -0.2, -0.3, -0.4, -0.5, -0.3],
    "token_confidences": [5.0, 4.0, 3.0, 2.0, 1.0, 3.0],
    "token_ends": [end + 1 for end in ENDS],
}


def _recorded(tmp_path, *records: dict) -> RecordedEngine:
    path = tmp_path / "drafts.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return RecordedEngine.load(str(path))


def _replay(engine: RecordedEngine, prompt: str, **params):
    return engine.generate([prompt], SamplingParams(**params), lambda e: None, Cancellation())[0]


def test_the_recorded_engine_replays_a_recorded_trace_when_asked(tmp_path):
    engine = _recorded(
        tmp_path,
        {"question": QUESTION, "strategy": "Plan.", "text": " " + TEXT, "confidence": CONFIDENCE},
        {"question": QUESTION, "strategy": "Guess.", "text": TEXT},
    )
    prompt = engine.format_chat("system", f"{QUESTION}\nPlan.")
    full = _replay(engine, prompt, max_new_tokens=64, top_logprobs=20)
    assert full.text == TEXT
    assert full.trace == TokenTrace(
        tuple(CONFIDENCE["token_logprobs"]), tuple(CONFIDENCE["token_confidences"]), tuple(ENDS)
    )

    cut = _replay(engine, prompt, max_new_tokens=3, top_logprobs=20)  # three words: "Six times seven.\n"
    assert cut.finish_reason == "length" and cut.text == "Six times seven.\n"
    assert cut.trace == TokenTrace((-0.1, -0.2, -0.3), (5.0, 4.0, 3.0), (3, 9, 17))

    assert _replay(engine, prompt, max_new_tokens=64).trace is None  # not asked
    assert _replay(engine, engine.format_chat("system", f"{QUESTION}\nGuess."), top_logprobs=20).trace is None
    assert _replay(engine, "no recorded question", top_logprobs=20).trace is None


def test_a_malformed_recorded_trace_fails_the_load(tmp_path):
    confidence = CONFIDENCE | {"token_ends": ENDS[:-1]}
    with pytest.raises(EngineError, match="confidence series of 6, 6 and 5 tokens") as caught:
        _recorded(tmp_path, {"question": QUESTION, "strategy": "Plan.", "text": TEXT, "confidence": confidence})
    assert caught.value.status == "FAILED_PRECONDITION"
    with pytest.raises(EngineError, match="no object"):
        _recorded(tmp_path, {"question": QUESTION, "strategy": "Plan.", "text": TEXT, "confidence": [1, 2]})


def test_a_cancelled_replay_keeps_the_trace_of_its_text(tmp_path):
    engine = _recorded(tmp_path, {"question": QUESTION, "strategy": "Plan.", "text": TEXT, "confidence": CONFIDENCE})
    cancel = Cancellation()
    deltas = itertools.count()

    def on_event(event) -> None:
        if isinstance(event, TextDelta) and next(deltas) == 0:
            cancel.cancel_sequence(0)  # after the first delta

    [completion] = engine.generate([QUESTION], SamplingParams(top_logprobs=5), on_event, cancel)
    assert completion.finish_reason == "aborted" and completion.text == "Six times "
    assert completion.trace is not None and completion.trace.ends[-1] <= len(completion.text)
