"""`deliberate traces` on the trace file of a real local stack: the four services and the gateway append their
spans to one file (`Stack(trace_file=…)`, as `deliberate up --trace-file` does), three solves run (one needs
re-draft rounds), and the analysis agrees with what the SolveResponses say about each request. A fourth request,
through the gateway, comes after `--end` and is looked at alone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter

import pytest

from deliberate.cli.stack import Ports, Stack
from deliberate.core.stats import percentile
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

pytestmark = pytest.mark.model

SERVICES = {"deliberate-drafter", "deliberate-verifier", "deliberate-refiner", "deliberate-scheduler"}
IMPOSSIBLE = [{"id": "impossible", "celExpression": "size(text) < 0", "failureMessage": "no text is that short"}]
REQUESTS = [
    build_request(
        "What is 6 times 7?", num_drafts=2, max_new_tokens=24, refine_max_new_tokens=12, seed=3, request_id="ta-mul"
    ),
    build_request(
        "Name a colour.", num_drafts=2, max_new_tokens=8, refine_max_new_tokens=8, seed=5, constraints=IMPOSSIBLE,
        request_id="ta-redraft",
    ),
    build_request(
        "What is 12 plus 30?", num_drafts=3, max_new_tokens=24, refine_max_new_tokens=12, seed=4, request_id="ta-add"
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """The trace file, the responses and the time between them and the gateway's request, once the stack
    stopped (a graceful stop flushes every span)."""
    directory = tmp_path_factory.mktemp("traces")
    trace_file = directory / "spans.jsonl"
    stack = Stack(ports=Ports.free(), log_dir=directory / "logs", trace_file=trace_file)
    with stack:
        with DeliberateClient(stack.address) as client:
            responses = {r.request_id: client.solve(r, timeout=240) for r in REQUESTS}
        between = time.time()
        chat = {
            "model": "deliberate",
            "messages": [{"role": "user", "content": "What is 2 plus 2?"}],
            "max_tokens": 12,
            "max_draft_tokens": 16,
            "num_drafts": 2,
            "request_id": "ta-gateway",
        }
        post = urllib.request.Request(
            f"{stack.gateway_url}/v1/chat/completions", json.dumps(chat).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(post, timeout=240) as reply:
            assert reply.status == 200
    codes = stack.down()  # already down: the exit codes it recorded
    assert codes.get("gateway") == 0, "the gateway exits through its span flush"
    return trace_file, responses, between


def traces(*args: str) -> str:
    command = [sys.executable, "-m", "deliberate.cli.traces", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout


def test_every_line_is_an_otlp_json_request_and_every_parent_is_in_the_file(solved):
    trace_file, _, _ = solved
    spans, services = [], set()
    for line in trace_file.read_text().splitlines():
        request = json.loads(line)
        for resource_spans in request["resourceSpans"]:
            attributes = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
            services.add(attributes["service.name"]["stringValue"])
            spans += [span for scope in resource_spans["scopeSpans"] for span in scope["spans"]]
    assert services >= SERVICES | {"deliberate-gateway"}
    ids = {span["spanId"] for span in spans}
    for span in spans:
        assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
        assert int(span["traceId"], 16) and span["spanId"] == span["spanId"].lower(), "hex, not base64"
        assert isinstance(span["kind"], int) and isinstance(span["startTimeUnixNano"], str)
        assert not span.get("parentSpanId") or span["parentSpanId"] in ids, span["name"]


def test_the_analysis_agrees_with_the_responses(solved):
    trace_file, responses, between = solved
    document = json.loads(traces("--file", str(trace_file), "--end", str(between), "--json"))

    assert document["requests"] == len(REQUESTS)
    by_id = {r["request_id"]: r for r in document["per_request"]}
    assert set(by_id) == set(responses)
    for request_id, response in responses.items():
        seen = by_id[request_id]
        assert seen["trace_id"] == response.trace_id
        assert seen["status"] == pb.SolveStatus.Name(response.status)
        assert seen["rounds"] == response.rounds
        assert seen["generated"] == len(response.drafts)
        assert seen["duplicates"] == sum(bool(d.duplicate_of) for d in response.drafts)
        assert seen["valid"] == sum(d.verdict.valid for d in response.drafts)
        assert seen["selected"] == len(response.selected_draft_ids)
        assert seen["draft_tokens"] == sum(d.draft.usage.completion_tokens for d in response.drafts)
    assert responses["ta-redraft"].rounds > 1, "the impossible constraint forced re-draft rounds"

    drafts = [d for response in responses.values() for d in response.drafts]
    failed = Counter(
        rule for d in drafts for rule in {r.rule_id for r in d.verdict.rule_results if r.hard and not r.passed}
    )
    assert {r["rule"]: r["drafts"] for r in document["rejecting_rules"]} == failed
    assert failed and not any(d.verdict.valid for d in responses["ta-redraft"].drafts), "re-drafts were rejected"

    redrafts = document["redrafts"]
    assert redrafts["requests_redrafted"] == sum(r.rounds > 1 for r in responses.values())
    assert redrafts["extra_rounds"] == sum(r.rounds - 1 for r in responses.values())
    assert redrafts["extra_round_tokens"] == sum(d.draft.usage.completion_tokens for d in drafts if d.round > 0)
    redrafted_seconds = sum(r.timings.total.ToTimedelta().total_seconds() for r in responses.values() if r.rounds > 1)
    assert 0 < redrafts["extra_round_seconds"] < redrafted_seconds, "extra rounds are within the solves that had them"

    for stage in ("draft", "verify", "select", "refine", "total"):
        seconds = [getattr(r.timings, stage).ToTimedelta().total_seconds() for r in responses.values()]
        assert document["stages"][stage]["count"] == len(responses)
        assert document["stages"][stage]["p50"] == pytest.approx(percentile(seconds, 0.5), abs=1e-5)
        assert document["stages"][stage]["p99"] == pytest.approx(percentile(seconds, 0.99), abs=1e-5)
    assert len(document["slowest_drafts"]) == 5


def test_one_requests_critical_path_ends_with_its_refinement(solved):
    trace_file, responses, _ = solved
    document = json.loads(traces("--file", str(trace_file), "--request-id", "ta-redraft", "--json"))
    assert document["requests"] == 1
    path = document["critical_path"]
    assert path["trace_id"] == responses["ta-redraft"].trace_id
    names = [step["name"] for step in path["steps"]]
    assert names[0] == "/deliberate.scheduler.v1.SchedulerService/Solve"
    assert "deliberate.round" in names and "/deliberate.refiner.v1.RefinerService/Refine" in names
    assert sum(step["on_path_s"] for step in path["steps"]) == pytest.approx(path["seconds"], abs=1e-6)

    text = traces("--file", str(trace_file), "--request-id", "ta-redraft")
    assert "critical path of request ta-redraft" in text
    verdicts = [d.verdict for d in responses["ta-redraft"].drafts]
    rejecting = {r.rule_id for v in verdicts for r in v.rule_results if r.hard and not r.passed}
    assert all(rule in text for rule in rejecting) and "re-drafts: 1 of 1 request(s)" in text


def test_a_request_through_the_gateway_starts_its_path_at_the_gateways_call(solved):
    trace_file, _, between = solved
    document = json.loads(traces("--file", str(trace_file), "--request-id", "ta-gateway", "--json"))
    # the chat's num_drafts reached the Scheduler: 2 drafts a round (a round of two short drafts may all fail and
    # be drafted again)
    seen = document["per_request"][0]
    assert document["requests"] == 1 and seen["generated"] == 2 * seen["rounds"]
    root, solve = document["critical_path"]["steps"][:2]
    assert (root["service"], root["name"]) == (
        "deliberate-gateway",
        "/deliberate.scheduler.v1.SchedulerService/SolveStream",
    )
    assert solve["service"] == "deliberate-scheduler" and solve["depth"] == 1
    assert json.loads(traces("--file", str(trace_file), "--start", str(between), "--json"))["requests"] == 1
