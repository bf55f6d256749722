"""The OpenAI-compatible gateway against the real stack, spoken to with the official `openai` SDK.

Against the stack of this test session, or — with DELIBERATE_GATEWAY_URL set, as `make test-clients` runs
clients/openai/test.sh — against that gateway; the tests that read service logs or start a gateway of their
own need the session's stack and are skipped then."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import jsonschema
import openai
import pytest

from deliberate.cli.stack import Ports
from tests.integration.test_cancellation import abort_of, wait_until_drafting

pytestmark = pytest.mark.model

QUESTION = "Tom has 3 boxes of 12 eggs. He uses 5 eggs. How many eggs are left?"
SHORT = {"max_tokens": 48, "max_draft_tokens": 48}  # extension fields go in extra_body
STATUSES = {"verified", "computation_checked", "unchecked", "unverified"}


@pytest.fixture(scope="module")
def gateway_url(request) -> str:
    return os.environ.get("DELIBERATE_GATEWAY_URL") or request.getfixturevalue("stack").gateway_url


@pytest.fixture(scope="module")
def own_stack(request):
    """The session's stack, for tests that read its logs or reach its Scheduler."""
    if os.environ.get("DELIBERATE_GATEWAY_URL"):
        pytest.skip("needs the test session's own stack (its logs and ports)")
    return request.getfixturevalue("stack")


@pytest.fixture(scope="module")
def client(gateway_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway_url}/v1", api_key="unused", timeout=240, max_retries=0)


def test_a_chat_completion_is_the_staged_answer_with_its_drafts_as_further_choices(client):
    reply = client.chat.completions.create(
        model="deliberate",
        messages=[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": QUESTION}],
        n=2,
        temperature=0.4,
        seed=7,
        extra_body={"num_drafts": 3, "final_text": "refine", **SHORT},  # refined: every stage spends tokens
    )
    summary = reply.model_extra["deliberate"]
    assert summary["status"] in STATUSES and summary["status_reason"]
    assert len(summary["trace_id"]) == 32 and reply.id == f"chatcmpl-{summary['request_id']}"
    assert summary["timings_s"]["total"] > 0 and summary["timings_s"]["draft"] > 0
    drafts = summary["drafts"]
    assert len(drafts) >= 3 and summary["num_drafts"] == 3
    assert all(d["completion_tokens"] <= 48 for d in drafts)

    answer, draft = reply.choices
    assert answer.index == 0 and answer.message.role == "assistant"
    assert answer.message.model_extra["reasoning_content"].startswith("[THINKING_TRACE:")
    assert "[THINKING_TRACE:" not in answer.message.content
    assert answer.model_extra["deliberate"]["status"] == summary["status"]
    # Choice 1 is the best draft: valid ones first, the selected first among those.
    best = next(d for d in drafts if d["id"] == draft.model_extra["deliberate"]["draft_id"])
    assert best["selected"] == (best["id"] in summary["selected_draft_ids"])
    assert best["valid"] or not any(d["valid"] for d in drafts)
    assert draft.model_extra["deliberate"]["status"] == ("valid" if best["valid"] else "invalid")

    # Every stage's tokens are counted: all drafts and the refinement.
    tokens = summary["tokens"]
    assert tokens["drafts"]["completion_tokens"] == sum(d["completion_tokens"] for d in drafts)
    assert tokens["refine"]["completion_tokens"] > 0
    assert (
        reply.usage.completion_tokens == tokens["drafts"]["completion_tokens"] + tokens["refine"]["completion_tokens"]
    )
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_a_streamed_completion_sends_the_refinement_as_it_is_generated(client):
    stream = client.chat.completions.create(
        model="deliberate",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"num_drafts": 2, **SHORT},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = [c.choices[0].delta.model_extra.get("reasoning_content") for c in chunks if c.choices]
    assert any(r and r.startswith("[THINKING_TRACE:") for r in reasoning)
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "stop"
    summary = finals[0].model_extra["deliberate"]
    assert summary["status"] in STATUSES and len(summary["drafts"]) >= 2
    # The content streamed is the answer, unless re-verification rejected the refinement: then the last chunk
    # says so and carries the answer (the best draft).
    if summary.get("answer_replaced"):
        assert summary["answer"] != content
    else:
        assert content.strip() and "answer" not in summary
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage.completion_tokens == (
        summary["tokens"]["drafts"]["completion_tokens"] + summary["tokens"]["refine"]["completion_tokens"]
    )


SCHEMA = {
    "type": "object",
    "properties": {"eggs_left": {"type": "integer"}},
    "required": ["eggs_left"],
    "additionalProperties": False,
}


def test_a_json_schema_response_format_is_the_output_schema_every_draft_is_checked_against(client):
    reply = client.chat.completions.create(
        model="deliberate",
        messages=[{"role": "user", "content": QUESTION + " Answer as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "eggs", "schema": SCHEMA, "strict": True}},
        extra_body={"num_drafts": 2, **SHORT},
    )
    summary = reply.model_extra["deliberate"]
    for draft in summary["drafts"]:
        checked = "json_schema" in draft["passed"] or any(e.startswith("json_schema") for e in draft["errors"])
        # A decision program (the round's last draft) that printed no plan stops at its program, before the schema.
        unprinted = draft.get("kind") == "program" and any(e.startswith("program failed") for e in draft["errors"])
        assert checked or unprinted, draft
    if summary["status"] != "unverified":  # an answer from a draft that passed the schema
        jsonschema.validate(json.loads(reply.choices[0].message.content), SCHEMA)


def test_a_value_the_scheduler_refuses_is_a_400_naming_the_openai_field(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="deliberate", messages=[{"role": "user", "content": QUESTION}], temperature=3.5
        )
    error = refused.value
    assert error.status_code == 400 and error.param == "temperature" and error.code == "invalid_argument"
    assert error.body["message"].startswith("temperature: must be in [0") and error.body["message"].endswith("3.5")

    with pytest.raises(openai.BadRequestError) as streamed:  # refused before the event stream starts
        client.chat.completions.create(
            model="deliberate", messages=[{"role": "user", "content": QUESTION}], stream=True,
            extra_body={"constraints": [{"celExpression": "answer >"}]},
        )  # fmt: skip
    assert streamed.value.param == "constraints[0].cel_expression"


def test_more_choices_than_drafts_and_an_unknown_model_are_refused(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="deliberate", messages=[{"role": "user", "content": QUESTION}], n=4, extra_body={"num_drafts": 3}
        )
    assert refused.value.param == "n"
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    assert unknown.value.param == "model"
    assert [model.id for model in client.models.list()] == ["deliberate"]


def test_health_reports_the_scheduler(gateway_url):
    with urllib.request.urlopen(f"{gateway_url}/health", timeout=5) as reply:
        assert reply.status == 200 and json.load(reply) == {"status": "ok", "scheduler": "SERVING"}


def test_a_client_that_disconnects_cancels_the_solve(own_stack):
    request_id = f"gateway-disconnect-{time.time_ns()}"
    url = urllib.parse.urlsplit(own_stack.gateway_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    body = {
        "model": "deliberate",
        "messages": [{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
        "num_drafts": 2, "max_draft_tokens": 1024, "request_id": request_id,
    }  # fmt: skip
    connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    wait_until_drafting(own_stack)
    time.sleep(1.0)  # well into its 1024 tokens (the most a request may ask; ~10 s or more here)
    connection.close()  # without reading the response: the caller went away
    # Aborted, not finished: without the cancel the Drafter would decode its 1024 tokens and log no abort. (How soon
    # is test_cancellation's to bound; a loaded machine delays the cancel's way through two processes.)
    abort_of(own_stack, "drafter", request_id, wait_s=60)
    gateway_log = (own_stack.log_dir / "gateway.log").read_text()
    assert "client disconnected; cancelling the solve" in gateway_log


def test_with_api_keys_a_request_without_one_is_a_401(own_stack, tmp_path):
    port = Ports.free().gateway
    gateway = subprocess.Popen(
        [sys.executable, "-m", "deliberate.gateway", "--port", str(port), "--scheduler-address", own_stack.address,
         "--api-keys", "key-one,key-two"],
        stdout=(tmp_path / "gateway.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and gateway.poll() is None, (tmp_path / "gateway.log").read_text()
                time.sleep(0.25)
        with pytest.raises(openai.AuthenticationError) as refused:
            openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list()
        assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
        assert [m.id for m in openai.OpenAI(base_url=base, api_key="key-two", max_retries=0).models.list()] == [
            "deliberate"
        ]
    finally:
        gateway.terminate()
        gateway.wait(15)
