"""Adaptive draft counts, cross-modal agreement and confidence stops: chosen on the tuning problems, scored on others.

    deliberate bench adaptive-stop [--calibrate RUNS …]
                                  [--runs bench/studies/gsm8k-headline/eval-gsm8k-200.runs.jsonl]

Every policy of `deliberate_bench.stopping` (the order in which a round adds prose drafts and programs, how many start
together, the quorum that settles it, cross-modal agreement) is replayed on the calibration runs (the tuning blocks,
never scored) against the default round of 5 (`--program-drafts` of them programs, each to its end). For each accuracy
loss allowed there (`--losses`, in points) the policy with the fewest tokens is chosen — with and without a confidence
stop whose limits per kind are the 5th percentile of the right drafts' lowest window (`confidence_stop`) — and only then
replayed on the scored runs, so nothing is fitted on what is scored. Writes
bench/studies/adaptive-counts/adaptive_stop.json: per choice, its calibration and scored `token_ratio` (tokens with ÷
without) and `accuracy_change_points` (the selected answer's accuracy with − without, same drafts, paired); and
`agreement_precision`: how often a valid prose draft and a valid program that agree are right, against two prose drafts
that agree (whether cross-modal agreement may settle a round sooner).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from deliberate_bench.replays.confidence_stop import read_records, stop_point, thresholds
from deliberate_bench.replays.stopping import agreement_precision, choose, compare
from deliberate_bench.results import LAB_FILES, TUNING_RUNS, runs_present, write_result

CONFIDENCE_PERCENTILE = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibrate", type=Path, nargs="+", default=list(TUNING_RUNS), help="the tuning blocks' runs")
    parser.add_argument("--runs", type=Path, default=LAB_FILES / "eval-gsm8k-200.runs.jsonl")
    parser.add_argument("--losses", default="0,2,4", help="accuracy losses allowed on the calibration runs, points")
    args = parser.parse_args(argv)
    calibration = [r for path in args.calibrate for r in read_records(path)]
    scored = read_records(args.runs) if runs_present(args.runs) else []
    limits = thresholds([r for r in calibration if any(d.get("confidence") for d in r["solve"]["drafts"])],
                        CONFIDENCE_PERCENTILE)  # fmt: skip
    confidence = {"limits": limits, "stop_point": stop_point}
    choices = []
    for loss in (float(x) for x in args.losses.split(",")):
        for label, options in (("counts", {}), ("counts+confidence", confidence)):
            chosen = choose(calibration, loss, **options)
            if chosen is None:
                continue
            policy, on_calibration = chosen
            choices.append({
                "allowed_loss_points": loss,
                "stops": label,
                "policy": policy.name,
                "calibration": on_calibration,
                "scored": compare(scored, policy, **options) if scored else None,
            })  # fmt: skip
            print(json.dumps(choices[-1]), flush=True)
    write_result("adaptive_stop", {
        "calibration_runs": [path.name for path in args.calibrate],
        "scored_runs": args.runs.name if scored else None,
        "confidence_limits": {kind: round(value, 4) for kind, value in limits.items()},
        "agreement_precision": {"calibration": agreement_precision(calibration),
                                "scored": agreement_precision(scored) if scored else None},
        "choices": choices,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
