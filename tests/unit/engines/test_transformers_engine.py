"""TransformersEngine: penalties, sampling and matmul helpers on small tensors; streaming, cancel,
seeding and batching on the embedded model with short token budgets."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from deliberate.engines import Completion, GenerationEvent, SamplingParams, TextDelta
from deliberate.engines.transformers_decoding import (
    NucleusSampler,
    PresenceFrequencyPenalty,
    TokenLogprobs,
    skinny_linear,
)
from deliberate.engines.transformers_engine import MIN_SHARED_PREFIX, _locate, _RowStreamer

PAD = 0

# --- No model ---------------------------------------------------------------------------------------------


def test_penalties_count_only_generated_tokens():
    # Prompt columns 0..3 (row 1 left-padded); generated columns 4..6.
    input_ids = torch.tensor(
        [
            [5, 6, 7, 8, 7, 7, 3],
            [PAD, PAD, 5, 5, 5, 9, 2],
        ]
    )
    scores = torch.zeros(2, 10)
    out = PresenceFrequencyPenalty(presence=0.5, frequency=0.25, prompt_length=4)(input_ids, scores)

    expected = torch.zeros(2, 10)
    expected[0, 7] = -(0.5 + 2 * 0.25)  # generated twice (also in the prompt: not counted there)
    expected[0, 3] = -(0.5 + 0.25)
    expected[1, 5] = -(0.5 + 0.25)  # three times in the prompt, once generated
    expected[1, 9] = -(0.5 + 0.25)
    expected[1, 2] = -(0.5 + 0.25)
    assert torch.equal(out, expected)  # prompt-only tokens (6, 8) and padding stay untouched


def test_presence_is_flat_and_frequency_grows_with_count():
    input_ids = torch.tensor([[1, 4, 4, 4, 2]])  # prompt [1], generated 4 ×3 and 2 ×1
    presence = PresenceFrequencyPenalty(presence=1.0, frequency=0.0, prompt_length=1)(input_ids, torch.zeros(1, 6))
    frequency = PresenceFrequencyPenalty(presence=0.0, frequency=1.0, prompt_length=1)(input_ids, torch.zeros(1, 6))
    assert presence[0].tolist() == [0, 0, -1, 0, -1, 0]
    assert frequency[0].tolist() == [0, 0, -1, 0, -3, 0]


def test_penalty_counts_kept_between_steps_match_a_recount():
    full = torch.tensor([[3, 3, 1, 2, 1, 1], [PAD, 3, 4, 4, 0, 4]])
    stepwise = PresenceFrequencyPenalty(presence=0.3, frequency=0.2, prompt_length=2)
    for length in range(2, full.shape[1] + 1):  # one call per decode step, as generate does
        out = stepwise(full[:, :length], torch.zeros(2, 5))
    recount = PresenceFrequencyPenalty(presence=0.3, frequency=0.2, prompt_length=2)(full, torch.zeros(2, 5))
    assert torch.allclose(out, recount)


def test_nucleus_sampler_only_picks_tokens_inside_top_p():
    torch.manual_seed(0)
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    scores = probs.log().repeat(400, 1)
    for candidates in (2, 4):  # 2: the nucleus is wider than the candidates, so the full sort runs
        out = NucleusSampler(temperature=1.0, top_p=0.7, candidates=candidates)(None, scores)
        assert (torch.isfinite(out).sum(dim=1) == 1).all()  # one finite score per row: greedy picks it
        picked = Counter(out.argmax(dim=1).tolist())
        assert set(picked) == {0, 1}  # 0.5 alone < 0.7, 0.5 + 0.3 reaches it
        assert 0.5 < picked[0] / 400 < 0.75  # renormalised 0.5 / 0.8 = 0.625


def test_nucleus_sampler_keeps_the_best_token_at_top_p_zero():
    scores = torch.tensor([[0.0, 3.0, 1.0]])
    out = NucleusSampler(temperature=0.7, top_p=0.0)(None, scores)
    assert out.argmax().item() == 1 and math.isinf(out[0, 0].item())


@pytest.mark.parametrize("rows", [1, 5, 200])
def test_skinny_linear_matches_linear(rows):
    layer = torch.nn.Linear(24, 40)
    x = torch.randn(rows, 1, 24)
    assert torch.allclose(skinny_linear(layer, x), F.linear(x, layer.weight, layer.bias), atol=1e-5)


def test_locate_accepts_a_gguf_file_or_a_directory_holding_one(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"")
    assert _locate(str(tmp_path / "m.gguf")) == (str(tmp_path), "m.gguf")
    assert _locate(str(tmp_path)) == (str(tmp_path), "m.gguf")
    (tmp_path / "config.json").write_text("{}")
    assert _locate(str(tmp_path)) == (str(tmp_path), None)
    with pytest.raises(FileNotFoundError):
        _locate(str(tmp_path / "missing"))


class _CharTokenizer:
    """Token id n is the character chr(n); id 0 is EOS and has no text."""

    def decode(self, ids, **kwargs) -> str:
        return "".join(chr(i) for i in ids if i)


def test_token_logprobs_change_no_score_and_pair_each_step_with_its_tokens():
    recorder = TokenLogprobs(top_k=2)
    first = torch.tensor([[0.0, 1.0, 2.0, 3.0], [3.0, 0.0, 0.0, 0.0]])
    second = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 5.0, 1.0]])
    assert recorder(None, first) is first  # the scores pass through untouched
    recorder(None, second)  # a step ahead of the streamer, as generate's deferred stop check runs

    sampled, top = recorder.take(torch.tensor([2, 0]))  # first step's tokens
    expected = F.log_softmax(first, dim=-1)
    assert sampled == pytest.approx([expected[0, 2].item(), expected[1, 0].item()])
    assert top[0] == pytest.approx([expected[0, 3].item(), expected[0, 2].item()])
    sampled, _ = recorder.take(torch.tensor([[1], [2]]))
    assert sampled == pytest.approx([-math.log(4), F.log_softmax(second[1], dim=-1)[2].item()])
    assert recorder.take(torch.tensor([0, 0])) is None


def test_streamer_traces_each_rows_tokens_on_its_text():
    a, b, c = ord("a"), ord("b"), ord("c")
    recorder = TokenLogprobs(top_k=3)
    events = []
    streamer = _RowStreamer(_CharTokenizer(), [5, 5], {0}, events.append, time.perf_counter(), recorder)
    streamer.put(torch.zeros(2, 5, dtype=torch.long))
    scores = torch.zeros(2, 128)
    scores[:, b] = 2.0
    for tokens in ([a, b], [b, 0], [c, 0]):  # row 1 stops on EOS (0) at its second token, then gets padding
        recorder(None, scores)
        streamer.put(torch.tensor(tokens))
    completions = streamer.close_open_rows("length")

    logprobs = F.log_softmax(scores[0], dim=-1)
    confidence = -logprobs.topk(3).values.mean().item()
    first, second = (c.trace for c in completions)
    assert completions[0].text == "abc" and completions[1].text == "b"
    assert first.logprobs == pytest.approx([logprobs[a].item(), logprobs[b].item(), logprobs[c].item()])
    assert first.confidences == pytest.approx([confidence] * 3)
    assert first.ends == (1, 2, 3)
    assert second.logprobs == pytest.approx([logprobs[b].item(), logprobs[0].item()])  # EOS counted, no text
    assert second.ends == (1, 1)

    plain = _RowStreamer(_CharTokenizer(), [5], {0}, lambda e: None, time.perf_counter())
    plain.put(torch.zeros(1, 5, dtype=torch.long))
    plain.put(torch.tensor([a]))
    assert plain.close_open_rows("length")[0].trace is None


# --- Embedded model -------------------------------------------------------------------------------------

QUESTIONS = [
    "What is 2+2?",
    "Name one primary color and say why it is called primary.",
    "A train leaves at 3 pm and travels 120 km at 60 km/h. When does it arrive? Show the steps.",
]


def _prompts(engine, questions=QUESTIONS):
    return [engine.format_chat("You are brief.", question) for question in questions]


@pytest.mark.model
def test_batch_streams_deltas_and_one_completion_per_row(embedded_engine):
    events = []
    params = SamplingParams(max_new_tokens=12, seed=3)
    completions = embedded_engine.generate(_prompts(embedded_engine), params, events.append, threading.Event())

    assert [c.index for c in completions] == [0, 1, 2]
    finished = [e for e in events if isinstance(e, Completion)]
    assert sorted(c.index for c in finished) == [0, 1, 2]
    for completion in completions:
        deltas = [e.text for e in events if isinstance(e, TextDelta) and e.index == completion.index]
        assert all(deltas)
        assert "".join(deltas) == completion.text
        assert completion.finish_reason in ("stop", "length")
        assert 0 < completion.completion_tokens <= 12
        assert "<|im_end|>" not in completion.text
    # No row's event comes after its own Completion.
    for index in range(3):
        last = max(i for i, e in enumerate(events) if e.index == index)
        assert isinstance(events[last], Completion)
    lengths = [len(embedded_engine._tokenizer(p)["input_ids"]) for p in _prompts(embedded_engine)]
    assert [c.prompt_tokens for c in completions] == lengths  # counted without padding
    assert embedded_engine.tokens_per_second > 0


@pytest.mark.model
def test_streamer_holds_split_characters_and_completes_each_row_at_its_eos(embedded_engine):
    tokenizer = embedded_engine._tokenizer
    eos = tokenizer.eos_token_id  # also the padding token: finished rows keep receiving it
    long_text, short_text = "Voilà 🙂 ok 日本", " hello ."  # 日 is split over three tokens
    long_ids = tokenizer.encode(long_text, add_special_tokens=False)
    short_ids = tokenizer.encode(short_text, add_special_tokens=False) + [eos]
    events = []
    streamer = _RowStreamer(tokenizer, [7, 9], {eos}, events.append, time.perf_counter())

    streamer.put(torch.zeros(2, 9, dtype=torch.long))  # generate hands over the prompt batch first
    for step, token in enumerate(long_ids):
        other = short_ids[step] if step < len(short_ids) else eos
        column = torch.tensor([token, other])
        streamer.put(column if step % 2 else column[:, None])  # (batch,) and (batch, 1) both occur
    completions = streamer.close_open_rows("length")

    deltas = {i: [e.text for e in events if isinstance(e, TextDelta) and e.index == i] for i in (0, 1)}
    assert not any("\ufffd" in text for text in deltas[0])
    assert "".join(deltas[0]) == completions[0].text == long_text
    assert "".join(deltas[1]) == completions[1].text == short_text  # no clean-up of " ."
    assert [(c.finish_reason, c.completion_tokens, c.prompt_tokens) for c in completions] == [
        ("length", len(long_ids), 7),
        ("stop", len(short_ids), 9),
    ]
    short_done = events.index(completions[1])
    assert any(isinstance(e, TextDelta) and e.index == 0 for e in events[short_done:])  # did not wait
    assert [e for e in events if isinstance(e, Completion)] == [completions[1], completions[0]]


@pytest.mark.model
def test_cancel_from_another_thread_aborts_quickly(embedded_engine):
    cancel = threading.Event()
    threading.Thread(target=cancel.set).start()
    started = time.perf_counter()
    completions = embedded_engine.generate(
        _prompts(embedded_engine),
        SamplingParams(max_new_tokens=256, min_new_tokens=256),
        lambda e: None,
        cancel,
    )
    assert time.perf_counter() - started < 10
    assert [c.finish_reason for c in completions] == ["aborted"] * 3
    assert all(c.completion_tokens <= 2 for c in completions)


@pytest.mark.model
def test_same_seed_same_texts(embedded_engine):
    params = SamplingParams(temperature=0.9, top_p=0.95, max_new_tokens=12, seed=1234)
    prompts = _prompts(embedded_engine, QUESTIONS[:2])

    def run():
        return [c.text for c in embedded_engine.generate(prompts, params, lambda e: None, threading.Event())]

    assert run() == run()


@pytest.mark.model
def test_stream_yields_events_and_closing_it_aborts(embedded_engine, monkeypatch):
    results = []
    generate = embedded_engine.generate

    def recording_generate(*args, **kwargs):
        results.append(generate(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(embedded_engine, "generate", recording_generate)
    prompts = _prompts(embedded_engine, QUESTIONS[:2])

    async def whole() -> list:
        return [event async for event in embedded_engine.stream(prompts, SamplingParams(max_new_tokens=8))]

    events = asyncio.run(whole())
    assert sum(isinstance(e, Completion) for e in events) == 2
    assert any(isinstance(e, TextDelta) for e in events)

    async def first_delta_then_close() -> GenerationEvent | None:
        stream = embedded_engine.stream(prompts, SamplingParams(max_new_tokens=256, min_new_tokens=256))
        async for event in stream:
            await stream.aclose()  # what a cancelled client call does
            return event
        return None

    started = time.perf_counter()
    first = asyncio.run(first_delta_then_close())
    assert isinstance(first, TextDelta)
    assert time.perf_counter() - started < 10
    assert [c.finish_reason for c in results[-1]] == ["aborted", "aborted"]
    assert all(c.completion_tokens < 256 for c in results[-1])


@pytest.mark.model
def test_shared_prefix_is_prefilled_once_and_changes_no_output(embedded_engine):
    hints = ["Work backwards.", "List the known quantities first, then compute.", "Estimate first."]
    prompts = [embedded_engine.format_chat("You are brief.", f"{QUESTIONS[2]}\n\nApproach: {h}") for h in hints]
    with torch.inference_mode():
        inputs, lengths = embedded_engine._batch_inputs(prompts)
    assert inputs["cache"].get_seq_length() >= MIN_SHARED_PREFIX
    assert inputs["attention_mask"].sum(dim=1).tolist() == lengths

    greedy = SamplingParams(temperature=0.0, max_new_tokens=8)
    together = embedded_engine.generate(prompts, greedy, lambda e: None, threading.Event())
    alone = [embedded_engine.generate([p], greedy, lambda e: None, threading.Event())[0] for p in prompts]
    assert [c.text for c in together] == [c.text for c in alone]
    assert [c.prompt_tokens for c in together] == [c.prompt_tokens for c in alone] == lengths


@pytest.mark.model
def test_batch_is_one_generate_call(embedded_engine, monkeypatch):
    calls = []
    generate = embedded_engine._model.generate

    def counting_generate(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape)
        return generate(*args, **kwargs)

    monkeypatch.setattr(embedded_engine._model, "generate", counting_generate)
    completions = embedded_engine.generate(
        _prompts(embedded_engine), SamplingParams(max_new_tokens=4), lambda e: None, threading.Event()
    )
    assert len(completions) == 3
    assert len(calls) == 1 and calls[0][0] == 3


@pytest.mark.model
def test_token_log_probabilities_are_the_models_own_untempered_ones_when_asked(embedded_engine, monkeypatch):
    taken = []
    take = TokenLogprobs.take

    def recording_take(self, tokens):
        taken.append(tokens.reshape(-1).tolist())
        return take(self, tokens)

    monkeypatch.setattr(TokenLogprobs, "take", recording_take)
    prompt = _prompts(embedded_engine)[2]
    # Temperature, top-p and penalties change what is sampled, not the reported distribution.
    params = SamplingParams(
        temperature=1.3, top_p=0.9, presence_penalty=0.5, max_new_tokens=10, min_new_tokens=10, seed=5, top_logprobs=4
    )
    [completion] = embedded_engine.generate([prompt], params, lambda e: None, threading.Event())

    trace = completion.trace
    assert len(trace.logprobs) == len(trace.confidences) == len(trace.ends) == completion.completion_tokens == 10
    assert list(trace.ends) == sorted(trace.ends) and trace.ends[-1] == len(completion.text)
    # The same numbers from one forward pass over the prompt and the sampled tokens.
    generated = [step[0] for step in taken]
    prompt_ids = embedded_engine._tokenizer(prompt, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logits = embedded_engine._model(input_ids=torch.tensor([prompt_ids + generated])).logits[0]
    logprobs = F.log_softmax(logits[len(prompt_ids) - 1 : -1].float(), dim=-1)
    expected = logprobs.gather(1, torch.tensor(generated)[:, None]).reshape(-1)
    assert list(trace.logprobs) == pytest.approx(expected.tolist(), abs=1e-3)
    assert list(trace.confidences) == pytest.approx((-logprobs.topk(4).values.mean(dim=-1)).tolist(), abs=1e-3)

    not_asked = SamplingParams(max_new_tokens=4, seed=5)
    assert embedded_engine.generate([prompt], not_asked, lambda e: None, threading.Event())[0].trace is None


@pytest.mark.model
def test_each_row_of_a_batch_gets_its_own_trace(embedded_engine):
    params = SamplingParams(max_new_tokens=12, seed=3, top_logprobs=3)
    completions = embedded_engine.generate(_prompts(embedded_engine), params, lambda e: None, threading.Event())
    for completion in completions:
        trace = completion.trace
        assert len(trace.logprobs) == completion.completion_tokens  # a row stopped on EOS: its EOS counted
        assert all(lp <= 0 for lp in trace.logprobs) and all(c > 0 for c in trace.confidences)
        assert list(trace.ends) == sorted(trace.ends) and trace.ends[-1] == len(completion.text)
