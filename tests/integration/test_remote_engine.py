"""The remote engine against a real llama.cpp HTTP server (xllamacpp's, OpenAI-compatible) in its own process,
on the small test model with tiny token budgets: drafts with text and token counts, streaming, seeds,
cancelling one sequence, a continued assistant prefix, schemas, token log-probabilities, errors mapped to gRPC
statuses, and a Drafter and a Refiner process on `--engine remote` answering over gRPC."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator

import grpc
import jsonschema
import pytest

from deliberate.cli.local_redis import free_port
from deliberate.cli.stack import Ports, Stack
from deliberate.engines import SamplingParams, TextDelta
from deliberate.engines.base import Cancellation, EngineError
from deliberate.engines.remote_engine import RemoteEngine, RemoteSettings
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc
from tests.conftest import TEST_MODEL
from tests.llama_server import running_llama_server

pytestmark = pytest.mark.model

QUESTION = "Count from 1 to 10, separated by commas."
# Per slot of the test server: the prompts here fit, TOO_LONG does not (a real 400 from llama.cpp).
CONTEXT_PER_SLOT = 1024
TOO_LONG = "word " * 1500


@pytest.fixture(scope="module")
def server_url():
    with running_llama_server(TEST_MODEL, context_per_slot=CONTEXT_PER_SLOT) as url:
        yield url


@pytest.fixture(scope="module")
def engine(server_url):
    return RemoteEngine.load(RemoteSettings(remote_url=server_url))


def _prompts(engine: RemoteEngine, count: int) -> list[str]:
    return [engine.format_chat("You are brief.", QUESTION)] * count


def test_drafts_stream_their_text_then_complete_with_token_counts(engine):
    events = []
    completions = engine.generate(_prompts(engine, 3), SamplingParams(max_new_tokens=12), events.append, Cancellation())

    assert [c.index for c in completions] == [0, 1, 2]
    for completion in completions:
        own = [e for e in events if e.index == completion.index]
        assert isinstance(own[0], TextDelta) and own[-1] == completion  # deltas first, the completion last
        assert "".join(e.text for e in own[:-1]) == completion.text and completion.text
        assert 0 < completion.completion_tokens <= 12 and completion.prompt_tokens > 10  # the server's usage
        assert completion.finish_reason in ("stop", "length")
    assert engine.tokens_per_second > 0


def test_a_seeded_sequence_is_reproducible_and_each_sequence_has_its_own_seed(engine):
    params = SamplingParams(temperature=1.5, top_p=1.0, max_new_tokens=16, seed=11)
    first, again = (engine.generate(_prompts(engine, 1), params, lambda e: None, Cancellation()) for _ in range(2))
    assert first[0].text == again[0].text

    texts = [c.text for c in engine.generate(_prompts(engine, 3), params, lambda e: None, Cancellation())]
    assert len(set(texts)) == 3  # seeds 11, 12, 13


def test_cancelling_one_sequence_closes_its_stream_while_the_others_finish(engine):
    cancel = Cancellation()

    def on_event(event) -> None:
        if isinstance(event, TextDelta) and event.index == 0:
            cancel.cancel_sequence(0)

    completions = engine.generate(_prompts(engine, 3), SamplingParams(max_new_tokens=24), on_event, cancel)
    assert completions[0].finish_reason == "aborted" and completions[0].completion_tokens < 24
    assert all(c.finish_reason in ("stop", "length") for c in completions[1:])


def test_text_appended_to_the_chat_is_continued_not_repeated(engine):
    prompt = engine.format_chat("You are brief.", QUESTION) + "1, 2, 3, 4,"
    [completion] = engine.generate(
        [prompt], SamplingParams(temperature=0.0, max_new_tokens=8), lambda e: None, Cancellation()
    )
    assert completion.text.lstrip().startswith("5"), completion.text


def test_an_output_schema_constrains_the_text(engine):
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["n"],
        "additionalProperties": False,
    }
    prompt = engine.format_chat("You are brief.", "Reply with a JSON object holding n = 7.")
    params = SamplingParams(temperature=0.0, max_new_tokens=24)
    [completion] = engine.generate([prompt], params, lambda e: None, Cancellation(), output_schema=schema)
    assert completion.finish_reason == "stop", completion.text
    jsonschema.validate(json.loads(completion.text), schema)


def test_token_log_probabilities_come_per_token_on_the_text_when_asked(engine):
    asked = SamplingParams(max_new_tokens=12, min_new_tokens=12, seed=3, top_logprobs=5)
    completions = engine.generate(_prompts(engine, 2), asked, lambda e: None, Cancellation())
    for completion in completions:
        trace = completion.trace
        assert len(trace.logprobs) == len(trace.confidences) == len(trace.ends) == completion.completion_tokens
        assert all(lp <= 0 for lp in trace.logprobs) and all(c > 0 for c in trace.confidences)
        assert list(trace.ends) == sorted(trace.ends) and trace.ends[-1] == len(completion.text)

    not_asked = SamplingParams(max_new_tokens=4, seed=3)
    assert engine.generate(_prompts(engine, 1), not_asked, lambda e: None, Cancellation())[0].trace is None


def test_a_prompt_longer_than_the_servers_context_is_invalid_argument(engine):
    prompt = engine.format_chat("You are brief.", TOO_LONG)
    with pytest.raises(EngineError, match=r"\(400\)") as caught:
        engine.generate([prompt], SamplingParams(max_new_tokens=8), lambda e: None, Cancellation())
    assert caught.value.status == "INVALID_ARGUMENT"


def test_an_unreachable_server_is_unavailable_naming_its_url_after_bounded_retries():
    url = f"http://127.0.0.1:{free_port()}/v1"
    engine = RemoteEngine(RemoteSettings(remote_url=url, remote_retries=2, remote_backoff_s=0.05), "any")
    started = time.monotonic()
    with pytest.raises(EngineError, match=f"unreachable at {url}/chat/completions after 3 tries") as caught:
        engine.generate(["hi"], SamplingParams(max_new_tokens=4), lambda e: None, Cancellation())
    assert caught.value.status == "UNAVAILABLE"
    assert time.monotonic() - started < 2.0  # 0.05 + 0.1 s of backoff and three refused connects

    with pytest.raises(EngineError, match=f"unreachable at {url}/models"):
        RemoteEngine.load(RemoteSettings(remote_url=url, remote_retries=0))


def test_a_server_still_starting_is_retried_and_a_wrong_api_key_is_refused():
    port = free_port()
    with running_llama_server(TEST_MODEL, port=port, api_key="right-key", wait=False) as url:
        # Connection refused while the model loads: retried with backoff until the server listens.
        engine = RemoteEngine.load(
            RemoteSettings(remote_url=url, remote_api_key="right-key", remote_retries=8, remote_backoff_s=0.25)
        )
        [completion] = engine.generate(["Say hi."], SamplingParams(max_new_tokens=4), lambda e: None, Cancellation())
        assert completion.completion_tokens > 0

        with pytest.raises(EngineError, match=r"refused the API key \(401\)") as caught:
            RemoteEngine.load(RemoteSettings(remote_url=url, remote_api_key="wrong-key"))
        assert caught.value.status == "FAILED_PRECONDITION"
        assert "wrong-key" not in str(caught.value)


def remote_env(server_url: str) -> dict[str, str]:
    return {"DELIBERATE_ENGINE": "remote", "DELIBERATE_REMOTE_URL": server_url, "DELIBERATE_REMOTE_MAX_PARALLEL": "4"}


@contextlib.contextmanager
def serving(stack: Stack, service: str) -> Iterator[None]:
    """`service` of `stack` started alone, SERVING, and stopped at exit."""
    stack.start(service)
    try:
        stack.wait_healthy(60, services=(service,))
        yield
    finally:
        stack.down()


def test_a_drafter_on_the_remote_engine_drafts_over_grpc(server_url, tmp_path):
    stack = Stack(ports=Ports.free(), env=remote_env(server_url), log_dir=tmp_path, with_gateway=False)
    with serving(stack, "drafter"):
        with grpc.insecure_channel(stack.address_of("drafter")) as channel:
            drafter = drafter_service_pb2_grpc.DrafterServiceStub(channel)
            request = drafter_service_pb2.GenerateDraftsRequest(
                request_id="remote-drafts",
                prompt="What is 6 * 7?",
                num_drafts=3,
                sampling=common_pb2.SamplingParams(max_new_tokens=16, seed=3),
            )
            drafts = [r.draft for r in drafter.GenerateDrafts(request, timeout=120)]
            load = drafter.GetLoad(drafter_service_pb2.GetLoadRequest(), timeout=10)

            too_long = drafter_service_pb2.GenerateDraftsRequest(request_id="too-long", prompt=TOO_LONG, num_drafts=1)
            with pytest.raises(grpc.RpcError) as caught:
                list(drafter.GenerateDrafts(too_long, timeout=60))

    assert sorted(d.index for d in drafts) == [0, 1, 2]
    assert all(d.text and d.usage.completion_tokens > 0 for d in drafts)
    assert (load.engine, load.capacity) == ("remote", 4)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "remote engine at" in caught.value.details() and "(400)" in caught.value.details()


def test_a_refiner_on_the_remote_engine_continues_the_drafts_consensus(server_url, tmp_path):
    stack = Stack(ports=Ports.free(), env=remote_env(server_url), log_dir=tmp_path, with_gateway=False)
    agreed = "Count: 1, 2, 3, 4,\n"
    # Lines are compared after normalizing spacing and punctuation, so the tails must differ in substance.
    drafts = [common_pb2.Draft(index=i, text=agreed + tail) for i, tail in enumerate(("5, 6", "6, 7", "five"))]
    request = refiner_service_pb2.RefineRequest(
        request_id="remote-refine",
        prompt=QUESTION,
        selected=[refiner_service_pb2.VerifiedDraft(draft=drafts[0])],
        all_drafts=drafts,
        sampling=common_pb2.SamplingParams(max_new_tokens=8, temperature=0.0),
        disable_thinking_trace=True,
    )
    with serving(stack, "refiner"), grpc.insecure_channel(stack.address_of("refiner")) as channel:
        replies = list(refiner_service_pb2_grpc.RefinerServiceStub(channel).Refine(request, timeout=120))

    final = replies[-1].final
    assert final.consensus_prefix == agreed and final.usage.completion_tokens > 0
    assert final.text.startswith(agreed) and final.text != agreed  # the model went on after the agreed line
    assert "".join(r.chunk.text for r in replies[:-1]) == final.text


def test_cancelling_while_the_server_evaluates_the_prompt_returns_at_once(engine):
    # Last: llama.cpp's server goes on evaluating the prompt it was sent, slowing what would follow.
    prompt = engine.format_chat("You are brief.", "Summarize: " + "tokens " * 800)  # seconds of prompt on 2 CPUs
    cancel = Cancellation()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    [completion] = engine.generate([prompt], SamplingParams(max_new_tokens=8), lambda e: None, cancel)
    assert time.monotonic() - started < 2.0  # its connection was shut, not left until the first token
    assert (completion.finish_reason, completion.text) == ("aborted", "")
