"""`deliberate bench load`'s figures from its calls: goodput counts right answers within the deadline only, refusals
and lost requests are told apart, and the ratio is taken against the single-program server level by level."""

from __future__ import annotations

from deliberate_bench.live.load import Call, failures, goodput_ratios, point

DEADLINE = 60.0


def call(started: float, took: float, code: str = "OK", right: bool = True, drafts: int = 1, **kw) -> Call:
    return Call("gsm8k:1", started=started, ended=started + took, code=code, right=right, drafts=drafts, **kw)


def test_goodput_counts_right_answers_within_the_deadline_per_minute_of_wall_time():
    calls = [
        call(0, 10),  # right, in time
        call(10, 20, right=False),  # answered, wrong
        call(30, 60, code="DEADLINE_EXCEEDED", right=False),
        call(0, 120, drafts=3),  # right and answered, but past the deadline: not goodput
    ]
    p = point(calls, clients=2, deadline=DEADLINE)
    assert p["minutes"] == 2.0  # the last call ended at 120 s
    assert p["answered"] == 3 and p["right"] == 2
    assert p["throughput_per_min"] == 1.5
    assert p["goodput_per_min"] == 0.5
    assert p["deadline_exceeded"] == 1
    assert p["lost"] == 1  # 120 s > deadline + 5 s with no status: the server held it past its deadline
    assert p["drafts_mean"] == round(5 / 3, 2)


def test_refusals_are_not_latencies_and_retries_after_the_hint_are_counted():
    calls = [
        call(0, 5),
        call(0, 0.01, code="RESOURCE_EXHAUSTED", right=False, refused=True, hinted=True, retry_admitted=False),
        call(1, 9, refused=True, hinted=True, retry_admitted=True),  # admitted on the retry: its wait included
    ]
    p = point(calls, clients=2, deadline=DEADLINE)
    assert p["refused"] == 2 and p["refused_with_hint"] == 2
    assert (p["retries_admitted"], p["retries"]) == (1, 2)
    assert p["p50_s"] == 7.0  # median of 5 and 9; the refused call's 0.01 s is no latency of an admitted request


def test_failures_name_lost_requests_unhinted_refusals_and_silent_levels():
    good = point([call(0, 5)], clients=1, deadline=DEADLINE)
    lost = point([Call("lost", started=0, code="LOST")], clients=2, deadline=DEADLINE)
    unhinted = point([call(0, 1, code="RESOURCE_EXHAUSTED", right=False, refused=True)], clients=4, deadline=DEADLINE)
    found = failures([{"name": "default", "points": [good, lost, unhinted]}])
    assert any("at 2 clients: 1 lost" in f for f in found)
    assert any("at 2 clients: nothing answered" in f for f in found)
    assert any("at 4 clients" in f and "without a retry hint" in f for f in found)
    assert not any("at 1 clients" in f for f in found)
    # A refusal the sender did not mark (the single-program server's own bound, once) is named, not hidden.
    hidden = point([call(0, 5), call(0, 0.01, code="RESOURCE_EXHAUSTED", right=False)], clients=8, deadline=DEADLINE)
    assert hidden["refused_at_last"] == 1 and hidden["refused"] == 0
    assert any(
        "at 8 clients: 1 refusals not counted as refusals" in f for f in failures([{"name": "x", "points": [hidden]}])
    )


def test_goodput_ratio_is_against_the_single_program_server_at_the_same_level():
    def points(*goodputs: float) -> list[dict]:
        return [{"clients": 2**i, "goodput_per_min": g} for i, g in enumerate(goodputs)]

    ratios = goodput_ratios(
        [{"name": "default", "points": points(6.0, 5.0)}, {"name": "single-program", "points": points(4.0, 0.0)}]
    )
    assert ratios == [
        {"config": "default", "clients": 1, "goodput_ratio": 1.5},
        {"config": "default", "clients": 2, "goodput_ratio": None},  # nothing to divide by
    ]


def test_where_the_time_goes_is_read_from_the_schedulers_spans(tmp_path):
    """Real spans through the file exporter the stack's services use: the level's requests (by their id's tag) and
    no other's give the p50 seconds of each stage."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from deliberate.cli.trace_analysis import REQUEST_SPANS
    from deliberate.core import telemetry
    from deliberate_bench.live.load_stages import request_id, stage_figures, stage_table

    trace_file = tmp_path / "spans.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "deliberate-scheduler"}))
    provider.add_span_processor(SimpleSpanProcessor(telemetry.FileSpanExporter(trace_file)))
    tracer = provider.get_tracer("test")
    for number, (tag, draft) in enumerate([("default-c2", 4.0), ("default-c2", 6.0), ("default-c4", 30.0)]):
        attributes = {telemetry.REQUEST_ID: request_id(tag, number, "p1"), telemetry.stage_seconds("draft"): draft,
                      telemetry.stage_seconds("total"): draft + 1}  # fmt: skip
        with tracer.start_as_current_span(REQUEST_SPANS[0], attributes=attributes):
            pass
    figures = stage_figures(trace_file, "default-c2")
    assert figures["traced_requests"] == 2 and figures["stage_p50_s"] == {"draft": 5.0, "total": 6.0}
    table = stage_table([{"name": "default", "points": [{"clients": 2, **figures}]}])
    assert "| default | 2 | 2 | 5.0 | — | — | — | 6.0 |" in table
    assert stage_figures(tmp_path / "none.jsonl", "default-c2") == {}


def test_the_gateway_row_counts_an_http_refusal_and_a_deadline_as_the_grpc_rows_do():
    """A real HTTP server answering as the gateway does: 429 with retry-after-ms is a hinted refusal, 504 a deadline,
    200 an answer judged by its final line."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from deliberate_bench.eval.problems import Problem
    from deliberate_bench.live.load_gateway import through_gateway
    from deliberate_bench.live.load_items import gsm8k_item

    replies = iter([(429, {"retry-after-ms": "5"}, {}), (504, {}, {}),
                    (200, {}, {"choices": [{"message": {"content": "... so 72.\nFinal answer: 72"}}],
                               "deliberate": {"num_drafts": 4, "round_plan": {"drafts_started": 3}}})])  # fmt: skip

    class Gateway(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            status, headers, body = next(replies)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    problem = Problem(id="gsm8k:1", line=1, question="How many clips?", gold="72")
    try:
        refused, late, answered = (Call("gsm8k:1", started=0.0, request_id="load-gateway-c1-0") for _ in range(3))
        for call in (refused, late, answered):
            through_gateway(url, call, gsm8k_item(problem), max_new_tokens=64, timeout=10)
    finally:
        server.shutdown()
    assert (refused.code, refused.refused, refused.hinted) == ("RESOURCE_EXHAUSTED", True, True)
    assert late.code == "DEADLINE_EXCEEDED" and not late.refused
    assert answered.code == "OK" and answered.right and answered.drafts == 3, "drafts started, not the maximum"


def test_one_request_in_five_is_a_business_decision_judged_by_its_feasibility():
    from deliberate_bench.eval.problems import Problem
    from deliberate_bench.live.load_items import items

    problems = [Problem(id=f"gsm8k:{n}", line=n, question=f"q{n}", gold=str(n)) for n in range(8)]
    sent = items(problems, 0.2)
    assert [item.instance is not None for item in sent] == [False] * 4 + [True] + [False] * 4 + [True]
    assert [item.instance.case for item in sent if item.instance] == ["ads", "credit"]  # the cases in turn
    assert all(item.instance.split == "tuning" for item in sent if item.instance)
    assert [item.id for item in items(problems, 0.0)] == [problem.id for problem in problems]
    assert sent[0].right("... Final answer: 0") and not sent[0].right("Final answer: 1")
    assert not sent[4].right('{"selected_ids": []}')  # no plan of no ads passes the ad rules
    p = point([call(0, 10, business=True), call(0, 10, right=False, business=True), call(0, 10)], 3, DEADLINE)
    assert (p["business_answered"], p["business_right"], p["right"]) == (2, 1, 2)
