"""Stopping drafts on the model's own confidence, replayed on recorded drafts (issue 25, item 1, offline).

    deliberate bench confidence-stop [--calibrate bench/studies/tuning-blocks/eval-tuning.runs.jsonl]
                                    [--runs bench/studies/gsm8k-headline/eval-gsm8k-200.runs.jsonl]

DeepConf (arXiv 2508.15260) ends a trace once its token confidence, averaged over a sliding window, falls below a
threshold set from earlier traces. Here, per kind of draft (prose, program): the threshold is a low percentile of
the lowest-window confidence of the *right* drafts of the calibration runs (problems never scored: the tuning
block), so that share of right drafts would have been stopped there; windows of 16 tokens, none judged before the
32nd token. Each first-round draft of the scored runs is then decoded again on paper from its recorded per-token
series: a draft whose window falls below its kind's threshold stops there (its tokens after that point are saved,
and it leaves the vote with no answer). `token_ratio` is drafting tokens with ÷ without; accuracy is the majority
vote of the drafts left (`majority`, the drafts that finished) and the learned-free `weighted` policy is not
replayed (it needs verdicts of the cut text). Writes confidence_stop.json (no study keeps it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deliberate.core.stats import percentile
from deliberate.selection import majority, same_answer
from deliberate.selection.confidence import STOP_MIN_TOKENS as MIN_TOKENS
from deliberate.selection.confidence import WINDOW_TOKENS, window_means
from deliberate.selection.confidence import confidence_stop_point as stop_point  # noqa: F401 (adaptive_stop's)
from deliberate_bench.results import LAB_FILES, read_runs, write_result

PERCENTILES = (1, 5, 10, 20)


def read_records(path: Path) -> list[dict]:
    """The runs file's GSM8K problems whose Solve answered."""
    return [r for r in read_runs(path) if r.get("task") == "gsm8k" and "error" not in r.get("solve", {"error": 1})]


def first_round(record: dict) -> list[dict]:
    drafts = [d for d in record["solve"].get("drafts", []) if d["round"] == 0 and d.get("confidence")]
    return sorted(drafts, key=lambda d: d["index"])


def thresholds(records: list[dict], q: float) -> dict[str, float]:
    """Per kind: the q-th percentile of the lowest-window confidence of the right drafts."""
    lows: dict[str, list[float]] = {}
    for record in records:
        for d in first_round(record):
            if same_answer(d["answer"], record["gold"]):
                lowest = min(window_means(d["confidence"]["token_confidences"]))
                lows.setdefault(d.get("kind") or "prose", []).append(lowest)
    return {kind: percentile(values, q / 100) for kind, values in lows.items()}


def replay(records: list[dict], limits: dict[str, float]) -> dict:
    tokens_with = tokens_without = right_with = right_without = stopped = stopped_right = changed = 0
    for record in records:
        drafts = first_round(record)
        kept = []
        for d in drafts:
            series = d["confidence"]["token_confidences"]
            tokens_without += d["completion_tokens"]
            limit = limits.get(d.get("kind") or "prose")
            at = stop_point(series, limit) if limit is not None else None
            if at is None:
                tokens_with += d["completion_tokens"]
                kept.append(d["answer"])
            else:
                tokens_with += at
                stopped += 1
                stopped_right += same_answer(d["answer"], record["gold"])
        before, after = majority([d["answer"] for d in drafts]), majority(kept)
        right_without += same_answer(before, record["gold"])
        right_with += same_answer(after, record["gold"])
        changed += (before or "") != (after or "")
    return {
        "thresholds": {kind: round(value, 4) for kind, value in limits.items()},
        "token_ratio": round(tokens_with / tokens_without, 3) if tokens_without else None,
        "drafts_stopped": stopped,
        "right_drafts_stopped": stopped_right,
        "vote_right_without": right_without,
        "vote_right_with": right_with,
        "vote_changed": changed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibrate", type=Path, default=LAB_FILES / "eval-tuning.runs.jsonl")
    parser.add_argument("--runs", type=Path, default=LAB_FILES / "eval-gsm8k-200.runs.jsonl")
    args = parser.parse_args(argv)
    calibration = [r for r in read_records(args.calibrate) if first_round(r)]
    scored = [r for r in read_records(args.runs) if first_round(r)]
    if not calibration or not scored:
        print("no recorded drafts with token confidence in one of the runs files", file=sys.stderr)
        return 1
    drafts = sum(len(first_round(r)) for r in scored)
    figures = {
        "calibration": {"runs": args.calibrate.name, "problems": len(calibration)},
        "scored": {"runs": args.runs.name, "problems": len(scored), "drafts": drafts},
        "window_tokens": WINDOW_TOKENS,
        "min_tokens": MIN_TOKENS,
        "by_percentile": {str(q): replay(scored, thresholds(calibration, q)) for q in PERCENTILES},
    }
    print(json.dumps(figures, indent=2))
    write_result("confidence_stop", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
