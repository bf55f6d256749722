"""Where a load level's time goes, from the recorded spans: each request's seconds per stage — drafting (with any
wait for an engine slot), verification, selection, refinement — as the Scheduler records them on its request span,
read from the stack's trace file once the run is over (`deliberate traces --file` reads the same file). The
single-program server has no Scheduler: its whole time is one draft and its program's run."""

from __future__ import annotations

from pathlib import Path

from deliberate.cli.trace_analysis import STAGES, requests_of, stage_latency
from deliberate.cli.trace_spans import read_otlp_file


def request_id(tag: str, number: int, problem: str) -> str:
    """A load request's id: its configuration and level (`tag`), then a number no other request of the run has."""
    return f"load-{tag}-{number}-{problem}"


def stage_figures(trace_file: Path, tag: str) -> dict:
    """The p50 seconds of each stage over the level's traced requests (those whose id carries `tag`)."""
    if not trace_file.exists():
        return {}
    requests = [r for r in requests_of(read_otlp_file(trace_file)) if r.request_id.startswith(f"load-{tag}-")]
    if not requests:
        return {}
    stages = stage_latency(requests)
    return {
        "traced_requests": len(requests),
        "stage_p50_s": {stage: round(stages[stage]["p50"], 2) for stage in STAGES if stages[stage]["count"]},
    }


def stage_table(configs: list[dict]) -> list[str]:
    """The Markdown table of where the time goes, one row per traced level."""
    rows = [
        f"| {config['name']} | {p['clients']} | {p['traced_requests']} | "
        + " | ".join(str(p["stage_p50_s"].get(stage, "—")) for stage in STAGES)
        + " |"
        for config in configs
        for p in config["points"]
        if p.get("traced_requests")
    ]
    if not rows:
        return []
    return ["", "Where the time goes: p50 seconds per stage of the Scheduler's traced requests (drafting includes any "
            "wait for an engine slot).", "", f"| config | clients | traced | {' | '.join(STAGES)} |",
            "|---|---|---|" + "---|" * len(STAGES), *rows]  # fmt: skip
