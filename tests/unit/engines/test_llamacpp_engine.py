"""LlamaCppEngine on the small embedded model (SmolLM2-135M GGUF) with short token budgets: the chat
template, streaming, per-sequence seeds and cancellation, and schema-constrained decoding."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import jsonschema
import pytest

from deliberate.engines import Completion, SamplingParams, TextDelta
from deliberate.engines.base import Cancellation
from deliberate.engines.llamacpp_engine import EngineError

pytestmark = pytest.mark.model

QUESTION = "What is 17 * 3? Reply with one number."


def _prompt(engine, question: str = QUESTION) -> str:
    return engine.format_chat("You are brief.", question)


def test_format_chat_renders_the_models_own_template(llamacpp_engine):
    prompt = llamacpp_engine.format_chat("SYSTEM TEXT", "USER TEXT")
    assert prompt == (
        "<|im_start|>system\nSYSTEM TEXT<|im_end|>\n<|im_start|>user\nUSER TEXT<|im_end|>\n<|im_start|>assistant\n"
    )


def test_batch_streams_deltas_and_one_completion_per_sequence(llamacpp_engine):
    events = []
    params = SamplingParams(max_new_tokens=12, min_new_tokens=12, seed=5)
    completions = llamacpp_engine.generate([_prompt(llamacpp_engine)] * 3, params, events.append, threading.Event())

    assert [c.index for c in completions] == [0, 1, 2]
    for completion in completions:
        deltas = "".join(e.text for e in events if isinstance(e, TextDelta) and e.index == completion.index)
        assert deltas == completion.text and completion.text
        assert completion.completion_tokens == 12 and completion.finish_reason == "length"
        assert completion.prompt_tokens > 10
    finished = [e for e in events if isinstance(e, Completion)]
    assert sorted(e.index for e in finished) == [0, 1, 2]
    assert llamacpp_engine.tokens_per_second > 0


def test_each_sequence_has_its_own_seed(llamacpp_engine):
    params = SamplingParams(temperature=1.2, top_p=1.0, max_new_tokens=16, seed=11)
    texts = [
        c.text
        for c in llamacpp_engine.generate([_prompt(llamacpp_engine)] * 3, params, lambda e: None, threading.Event())
    ]
    assert len(set(texts)) == 3  # one shared seed would give three equal prompts three equal texts


def test_greedy_sequences_of_equal_prompts_agree(llamacpp_engine):
    params = SamplingParams(temperature=0.0, max_new_tokens=12)
    texts = [
        c.text
        for c in llamacpp_engine.generate([_prompt(llamacpp_engine)] * 2, params, lambda e: None, threading.Event())
    ]
    assert texts[0] == texts[1]


def test_one_sequence_is_cancelled_without_the_others(llamacpp_engine):
    cancel = Cancellation()

    def on_event(event):
        if isinstance(event, TextDelta) and event.index == 1:
            cancel.cancel_sequence(1)

    params = SamplingParams(max_new_tokens=24, min_new_tokens=24, seed=3)
    completions = llamacpp_engine.generate([_prompt(llamacpp_engine)] * 3, params, on_event, cancel)
    assert completions[1].finish_reason == "aborted"
    assert completions[1].completion_tokens <= 2  # stopped within a decoding step of the cancel
    assert [completions[i].finish_reason for i in (0, 2)] == ["length", "length"]
    assert [completions[i].completion_tokens for i in (0, 2)] == [24, 24]


def test_cancel_from_another_thread_stops_every_sequence(llamacpp_engine):
    cancel = Cancellation()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    params = SamplingParams(max_new_tokens=400, min_new_tokens=400)
    completions = llamacpp_engine.generate([_prompt(llamacpp_engine)] * 2, params, lambda e: None, cancel)
    assert {c.finish_reason for c in completions} == {"aborted"}
    assert all(c.completion_tokens < 400 for c in completions)
    assert time.monotonic() - started < 60  # 800 tokens would take far longer on these CPUs


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}, "unit": {"type": "string", "enum": ["clips", "dollars"]}},
    "required": ["answer", "unit"],
    "additionalProperties": False,
}


def test_output_schema_constrains_decoding(llamacpp_engine):
    prompt = _prompt(llamacpp_engine, "Natalia sold 48 clips in April and half as many in May. How many in all? JSON.")
    completions = llamacpp_engine.generate(
        [prompt] * 2, SamplingParams(max_new_tokens=60, seed=1), lambda e: None, threading.Event(), output_schema=SCHEMA
    )
    for completion in completions:
        assert completion.finish_reason == "stop"
        jsonschema.validate(json.loads(completion.text), SCHEMA)  # a draft that stops by itself parses


# Each keyword alone made llama.cpp decode with no grammar (prose, not JSON) before they were left out of it.
REFUSED_BY_THE_GRAMMAR = {
    "uniqueItems": {"uniqueItems": True},
    "contains": {"contains": {"type": "integer"}},
    "not": {"not": {"type": "string"}},
    "if": {"if": {"minItems": 1}, "then": {"maxItems": 3}},
}


@pytest.mark.parametrize("keyword", sorted(REFUSED_BY_THE_GRAMMAR))
def test_a_schema_with_a_keyword_the_grammar_refuses_still_constrains_decoding(llamacpp_engine, keyword):
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3}
    schema |= REFUSED_BY_THE_GRAMMAR[keyword]
    prompt = _prompt(llamacpp_engine, "Write a short poem about the sea.")  # nothing in it asks for JSON
    (completion,) = llamacpp_engine.generate(
        [prompt], SamplingParams(max_new_tokens=30, seed=3), lambda e: None, threading.Event(), output_schema=schema
    )
    value = json.loads(completion.text)
    assert isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) for v in value)


def test_closing_the_stream_aborts(llamacpp_engine):
    async def first_delta_then_leave():
        stream = llamacpp_engine.stream(
            [_prompt(llamacpp_engine)], SamplingParams(max_new_tokens=300, min_new_tokens=300)
        )
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        await stream.aclose()

    started = time.monotonic()
    asyncio.run(first_delta_then_leave())
    assert time.monotonic() - started < 30


def test_a_prompt_longer_than_the_context_is_refused_at_once(llamacpp_engine):
    started = time.monotonic()
    with pytest.raises(EngineError, match="exceeds the available context size"):
        llamacpp_engine.generate(
            [_prompt(llamacpp_engine, "word " * 9000)],
            SamplingParams(max_new_tokens=4),
            lambda e: None,
            threading.Event(),
        )
    assert time.monotonic() - started < 5  # refused before any prompt evaluation


def test_load_engine_takes_a_thread_count():
    from deliberate.engines import load_engine
    from tests.conftest import TEST_MODEL

    engine = load_engine("llamacpp", TEST_MODEL, threads=1)
    params = SamplingParams(max_new_tokens=4, min_new_tokens=4)
    [completion] = engine.generate([_prompt(engine)], params, lambda e: None, threading.Event())
    assert completion.completion_tokens == 4


def test_the_load_report_counts_sequences_from_submission_to_completion(llamacpp_engine):
    """4 slots (the fixture's parallel): 6 sequences are 4 busy and 2 queued until they complete or stop."""
    long = SamplingParams(max_new_tokens=300, min_new_tokens=300)
    short = SamplingParams(max_new_tokens=16, min_new_tokens=16)

    async def scenario():
        idle = llamacpp_engine.load_report()
        stream = llamacpp_engine.stream([_prompt(llamacpp_engine)] * 6, long)
        await anext(stream)  # decoding has begun; 300 tokens are seconds away
        during = llamacpp_engine.load_report()
        await stream.aclose()  # returns once the engine stopped: what never completed is released
        stopped = llamacpp_engine.load_report()
        made = 0
        async for event in llamacpp_engine.stream([_prompt(llamacpp_engine)] * 2, short):
            made += event.completion_tokens if isinstance(event, Completion) else 0
        return idle, during, stopped, made, llamacpp_engine.load_report()

    idle, during, stopped, made, done = asyncio.run(scenario())
    assert (idle.busy_sequences, idle.queued_sequences, idle.capacity) == (0, 0, 4)
    assert (during.busy_sequences, during.queued_sequences) == (4, 2)
    assert (stopped.busy_sequences, stopped.queued_sequences) == (0, 0)
    assert made == 32 and (done.busy_sequences, done.queued_sequences) == (0, 0)
    assert done.recent_tokens_per_second >= made / done.window_s  # this call's tokens, and any aborted ones


def test_token_log_probabilities_come_per_token_on_the_text_when_asked(llamacpp_engine):
    asked = SamplingParams(max_new_tokens=12, min_new_tokens=12, seed=3, top_logprobs=5)
    completion = llamacpp_engine.generate([_prompt(llamacpp_engine)], asked, lambda e: None, threading.Event())[0]
    trace = completion.trace
    assert len(trace.logprobs) == len(trace.confidences) == len(trace.ends) == completion.completion_tokens == 12
    assert all(lp <= 0 for lp in trace.logprobs) and all(c > 0 for c in trace.confidences)
    assert list(trace.ends) == sorted(trace.ends) and trace.ends[-1] == len(completion.text)

    not_asked = SamplingParams(max_new_tokens=4, seed=3)
    assert (
        llamacpp_engine.generate([_prompt(llamacpp_engine)], not_asked, lambda e: None, threading.Event())[0].trace
        is None
    )
