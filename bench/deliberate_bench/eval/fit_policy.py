"""Fits the learned selection policy's weights on labelled drafts and writes the shipped artefact.

    deliberate bench fit-policy bench/studies/tuning-blocks/eval-tuning.runs.jsonl --drafts 5:3+2

A logistic regression of "this valid draft's answer is right" on the selection signals (`replay.fit_weights`, the
Scheduler's own fitting code) over every GSM8K record of the runs file that carries token confidence, each
record's drafts chosen as a request would have drafted them (`--drafts`: `5` the first 5, `5:3+2` the first 3
prose drafts and the first 2 programs). Fit it on problems the evaluation never scores — the tuning block — so the
evaluation's `learned@n` rows measure it out of sample (docs/selection.md#the-learned-policy).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import sys
import time
from pathlib import Path

from deliberate.selection import same_answer
from deliberate.selection.learned import ARTEFACT, SCHEMA_VERSION, parse
from deliberate_bench.eval.replay import LEARNED_SIGNALS, drafts_chooser, fit_weights, parse_drafts
from deliberate_bench.results import read_runs, runs_lines


def has_confidence(record: dict) -> bool:
    return any(d.get("confidence") for d in record["solve"].get("drafts") or ())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="a runs file of `deliberate bench eval` (…/<name>.runs.jsonl)")
    parser.add_argument("--drafts", default="5:3+2", help="which drafts of each record a request ranks")
    parser.add_argument("--out", type=Path, default=ARTEFACT)
    args = parser.parse_args(argv)

    content = "".join(line + "\n" for line in runs_lines(args.runs)).encode()  # the records, compressed or not
    solved = [r for r in read_runs(args.runs) if r.get("task") == "gsm8k" and "solve" in r]
    records = [r for r in solved if "error" not in r["solve"]]
    usable = [r for r in records if has_confidence(r)]
    choose = drafts_chooser(*parse_drafts(args.drafts))
    problems = [(choose(r), r["gold"]) for r in usable]
    weights = fit_weights(problems, same_answer, LEARNED_SIGNALS)
    if weights is None:
        print(f"nothing to fit: {len(usable)} records with token confidence", file=sys.stderr)
        return 1
    digest = hashlib.sha256(content).hexdigest()
    document = {
        "schema": SCHEMA_VERSION,
        "version": f"{time.strftime('%Y-%m-%d', time.gmtime())}-{digest[:8]}",
        "weights": {name: round(value, 4) for name, value in weights.items()},
        "trained_on": {
            "runs": args.runs.name,
            "sha256": digest,
            "problems": len(usable),
            "problems_without_confidence_skipped": len(records) - len(usable),
            "drafts": sum(len(drafts) for drafts, _ in problems),
            "draft_set": args.drafts,
            "signals_left_out": [name for name in LEARNED_SIGNALS if name not in weights],
        },
        "command": "deliberate bench fit-policy " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
    }
    parse(document)  # what the Scheduler will read back
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
