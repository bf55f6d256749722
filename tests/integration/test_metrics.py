"""Prometheus metrics of the real services: after one solve, each service's `/metrics` moved by exactly what the
SolveResponse reports, and Debian's `prometheus` scrapes all four and answers queries for `deliberate_` series."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from deliberate.cli.local_redis import free_port
from deliberate.cli.stack import SERVICES
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request
from tests.metrics import has, scrape, value
from tests.repo.test_dashboard import dashboard_expressions

pytestmark = pytest.mark.model

OUTCOMES = (
    "generated", "valid", "invalid", "duplicate", "timed_out", "selected", "discarded", "aborted", "abandoned",
)  # fmt: skip


def scrape_all(stack) -> dict:
    return {service: scrape(stack.metrics_url(service)) for service in SERVICES}


@pytest.fixture(scope="module")
def solved(stack):
    """One solve with the services' metrics scraped before and after it."""
    before = scrape_all(stack)
    request = build_request("What is 9 + 4?", num_drafts=3, max_new_tokens=24, refine_max_new_tokens=12, seed=11)
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=240)
    return before, response, scrape_all(stack)


def moved(before, after, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_scheduler_counters_moved_by_what_the_response_reports(solved):
    before, response, after = solved
    s0, s1 = before["scheduler"], after["scheduler"]
    drafts = response.drafts
    expected = Counter(generated=len(drafts), selected=len(response.selected_draft_ids))
    expected["aborted"] = sum(r.HasField("aborted") for r in drafts)  # stopped early (docs/scheduler.md)
    expected["discarded"] = len(drafts) - len(response.selected_draft_ids) - expected["aborted"]
    expected["valid"] = sum(r.verdict.valid for r in drafts)
    expected["invalid"] = sum(not r.verdict.valid for r in drafts)
    expected["duplicate"] = sum(bool(r.duplicate_of) for r in drafts)
    expected["timed_out"] = sum(
        any(rule.rule_id == "verification_timeout" for rule in r.verdict.rule_results) for r in drafts
    )
    for outcome in OUTCOMES:
        assert moved(s0, s1, "deliberate_drafts_total", outcome=outcome) == expected[outcome], outcome

    status = pb.SolveStatus.Name(response.status).removeprefix("SOLVE_STATUS_").lower()
    assert moved(s0, s1, "deliberate_solves_total", status=status) == 1
    assert moved(s0, s1, "deliberate_solves_total") == 1, "no other status counted"
    assert moved(s0, s1, "deliberate_redraft_rounds_total") == response.rounds - 1

    # Rule results: one per rule of every verdict (a duplicate shares its original's; the Scheduler's own verdicts
    # of a draft timed out or stopped on a quorum count too).
    rules = Counter()
    for report in drafts:
        if not report.duplicate_of:
            for rule in report.verdict.rule_results:
                rules[(rule.rule_id, "abstained" if rule.abstained else "passed" if rule.passed else "failed")] += 1
    assert rules, "the drafts were verified"
    for (rule_id, outcome), count in rules.items():
        assert moved(s0, s1, "deliberate_rule_results_total", rule=rule_id, outcome=outcome) == count, rule_id
    assert moved(s0, s1, "deliberate_rule_results_total") == sum(rules.values())

    for stage in ("draft", "verify", "select", "refine", "total"):
        assert moved(s0, s1, "deliberate_stage_duration_seconds_count", stage=stage) == 1, stage
    total = response.timings.total.ToTimedelta().total_seconds()
    assert moved(s0, s1, "deliberate_stage_duration_seconds_sum", stage="total") == pytest.approx(total, abs=1e-3)
    assert value(s1, "deliberate_verifier_up") == 1


def test_each_service_reports_its_own_work(solved):
    before, response, after = solved
    assert moved(before["refiner"], after["refiner"], "deliberate_refine_token_budget_count") == 1
    budget = moved(before["refiner"], after["refiner"], "deliberate_refine_token_budget_sum")
    assert budget == response.refine_token_budget

    # A draft stopped on a quorum has the Scheduler's verdict; one aborted on a hard rule, the Verifier's early one.
    verified = sum(not r.duplicate_of and r.aborted.reason != "quorum" for r in response.drafts)
    if response.status != pb.SOLVE_STATUS_UNVERIFIED:
        verified += 1  # the safety net re-verifies the refined answer
    assert moved(before["verifier"], after["verifier"], "deliberate_verification_duration_seconds_count") == verified

    for service in ("drafter", "refiner"):
        samples = after[service]
        assert value(samples, "deliberate_engine_tokens_per_second") > 0, f"{service} generated just now"
        assert value(samples, "deliberate_engine_sequences_running") == 0, f"{service} is idle again"
        assert has(samples, "deliberate_engine_sequences_queued", engine="llamacpp")


def documented_metrics() -> dict[str, tuple[str, list[str]]]:
    """docs/telemetry.md's metrics table: name -> (type, the services that always serve it)."""
    text = (Path(__file__).resolve().parents[2] / "docs/telemetry.md").read_text()
    table = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| `deliberate_")]
    return {
        name.strip().strip("`"): (kind.strip(), [s.strip() for s in services.split(",") if "(" not in s])
        for name, kind, _, services, _ in rows
    }


def test_every_documented_metric_is_served_by_its_services(solved):
    _, _, after = solved
    documented = documented_metrics()
    assert len(documented) >= 13
    for name, (kind, services) in documented.items():
        sample = f"{name}_count" if kind == "histogram" else name
        for service in services:
            assert has(after[service], sample), f"{service} serves no {sample}"


def query(port: int, path: str, **params: str) -> dict:
    url = f"http://127.0.0.1:{port}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as reply:
        return json.loads(reply.read())["data"]


def test_prometheus_scrapes_every_service(stack, solved, tmp_path):
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    targets = {
        service: stack.metrics_url(service).removeprefix("http://").removesuffix("/metrics") for service in SERVICES
    }
    jobs = [
        {"job_name": service, "scrape_interval": "1s", "static_configs": [{"targets": [target]}]}
        for service, target in targets.items()
    ]
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({"scrape_configs": jobs}))  # JSON is YAML
    port = free_port()
    command = [
        "prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]  # fmt: skip
    with subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("wb")
    ) as server:
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    up = query(port, "/api/v1/query", query="up")["result"]
                    if len(up) == len(SERVICES) and all(r["value"][1] == "1" for r in up):
                        break
                except OSError:
                    pass  # still starting
                time.sleep(0.5)
            else:
                raise AssertionError(f"not every target up: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
            while time.monotonic() < deadline:
                series = query(port, "/api/v1/series", **{"match[]": '{__name__=~"deliberate_.+"}'})
                names = {(s["job"], s["__name__"]) for s in series}
                if ("refiner", "deliberate_refine_token_budget_count") in names:
                    break
                time.sleep(0.5)
            assert {"scheduler", "drafter", "verifier", "refiner"} <= {job for job, _ in names}
            for expected in [
                ("scheduler", "deliberate_drafts_total"),
                ("scheduler", "deliberate_solves_total"),
                ("scheduler", "deliberate_rule_results_total"),
                ("scheduler", "deliberate_stage_duration_seconds_bucket"),
                ("scheduler", "deliberate_verifier_up"),
                ("drafter", "deliberate_engine_tokens_per_second"),
                ("verifier", "deliberate_verification_duration_seconds_count"),
                ("refiner", "deliberate_refine_token_budget_count"),
            ]:
                assert expected in names, expected
            generated = query(port, "/api/v1/query", query='sum(deliberate_drafts_total{outcome="generated"})')
            assert float(generated["result"][0]["value"][1]) >= len(solved[1].drafts)

            # The Grafana dashboard's queries run on these series (Grafana's own variables given fixed windows); a
            # rate needs two scrapes of a series, so the main panels are asked again until they have a value.
            for expr in dashboard_expressions():
                promql = expr.replace("$__rate_interval", "1m").replace("$__range", "5m")
                result = query(port, "/api/v1/query", query=promql)["result"]  # a bad query is HTTP 400
                if re.search(r"deliberate_(solves_total|stage_duration|drafts_total|engine)", expr):
                    while not result and time.monotonic() < deadline:
                        time.sleep(0.5)
                        result = query(port, "/api/v1/query", query=promql)["result"]
                    assert result, expr
        finally:
            server.terminate()
