"""deploy/grafana/deliberate.json: a Grafana dashboard whose queries read only documented metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/deliberate.json"
HISTOGRAM_SERIES = re.compile(r"_(bucket|count|sum)$")


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def documented_metrics() -> set[str]:
    text = (ROOT / "docs/telemetry.md").read_text()
    return set(re.findall(r"^\| `(deliberate_[a-z_]+)` \|", text, flags=re.MULTILINE))


def test_every_query_reads_documented_metrics_only():
    documented = documented_metrics()
    used = {
        HISTOGRAM_SERIES.sub("", name)
        for expr in dashboard_expressions()
        for name in re.findall(r"deliberate_\w+", expr)
    }
    assert used and used <= documented, used - documented
    main = {"deliberate_solves_total", "deliberate_stage_duration_seconds", "deliberate_drafts_total"}
    assert main | {"deliberate_rule_results_total", "deliberate_watchdog_restarts_total"} <= used


def test_the_dashboard_imports_with_a_prometheus_data_source():
    dashboard = json.loads(DASHBOARD.read_text())
    (source,) = dashboard["__inputs"]
    assert source["pluginId"] == "prometheus"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${" + source["name"] + "}", panel["title"]
