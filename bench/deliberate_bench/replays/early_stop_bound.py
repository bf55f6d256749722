"""What early stopping can save on the default model's drafts: a replay of recorded rounds, the same drafts both ways.

    deliberate bench early-stop-bound [--runs bench/studies/gsm8k-headline/eval-gsm8k-200.runs.jsonl]
                                      [--step-seconds S1,S2,…]

`make bench-early-stop` measures early stopping live, but two live solves never draw the same drafts (llama.cpp's
sampling differs with the batch's layout), so its ratios carry the spread of two different samples (its control
run: 1.05 with identical logic). This replay takes the first round of every GSM8K problem in an evaluation's runs
file (real drafts of the default model, N=5, each with its text, tokens, verdict and answer) and decodes it again
on paper, step by step: one token per draft still generating, each step taking the time measured on this machine
for that many sequences side by side (so a stopped draft speeds up the others, as in the engine). Policies:

* `rules`, the Scheduler's default: a draft stops where the Verifier's arithmetic prefix check
  (`verifier.streaming`) first fails on its text; the round ends once the quorum rule (`early_stop_rules.quorum_reason`)
  holds on the drafts that finished and passed, cutting the drafts still generating;
* `clairvoyant`, a bound no policy can beat: every draft that fails any hard rule, wherever it fails, is stopped
  before its first token; the quorum rule as above.

Each is replayed with the default quorum (from N) and with quorums 1 and 2 (`by_quorum`), for comparison. The mix
comparison (`mix`) also replays the confidence stop (`+c`): a draft stops once its recorded token confidence over
16 tokens falls below its kind's floor (the default model's profile, calibrated on the tuning blocks), and leaves
the vote.
`sequential_token_ratio` is a third way, in tokens only: the drafts run one after another and the round ends once
the quorum rule holds with the drafts not yet started counted as still to come (adaptive self-consistency).
`token_ratio` is drafting tokens with ÷ without, `latency_ratio` drafting time with ÷ without, summed over problems.
`vote_accuracy_*` is a proxy for accuracy on the same drafts: the evaluation's majority vote (`majority@N`) over the
drafts that finished and passed, in the order they finished, equals the gold answer; the pipeline's selection and
refinement are not replayed; `vote_changed` counts the problems whose voted answer differs with and without.
Writes bench/studies/early-stopping/early_stop_bound.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deliberate.engines.models import confidence_floors
from deliberate.scheduler.round_plan import default_quorum
from deliberate.scheduler.rounds.stopping_rules import quorum_reason
from deliberate.scheduler.settings import SchedulerSettings
from deliberate.selection import DEFAULT_POLICY, answer_key, majority, same_answer
from deliberate.selection.confidence import confidence_stop_point
from deliberate.verifier.streaming import ArithmeticPrefix, GrowingDraft
from deliberate_bench.eval.replay import DEFAULT_MIX, first_of_kinds, mixes
from deliberate_bench.eval.replay import replay as rank
from deliberate_bench.eval.stats import paired_bootstrap
from deliberate_bench.results import LAB_FILES, TUNING_RUNS, read_runs, runs_present, write_result

# The pieces a draft's text is fed to the prefix check in: about a token each, as the Drafter streams it.
PIECE_CHARS = 4
# Generation lengths whose difference times one decoding step, and the tries of each (the fastest counts).
SHORT_TOKENS, LONG_TOKENS, TRIES = 16, 112, 3
QUORUMS_COMPARED = (1, 2)
# The default round before issue 25: 4 prose drafts and 1 program, every draft to its end. The mixes of a round of
# its size (one draft stays prose, as the Scheduler keeps it) are compared with it, and the default with them.
PREVIOUS_MIX = (4, 1)
ROUND_MIXES = tuple((prose, sum(PREVIOUS_MIX) - prose) for prose in range(sum(PREVIOUS_MIX) - 1, 0, -1))
# The accuracy a cheaper round may lose against the previous one on the calibration problems, in points (the
# allowance issue 25 sets for the default).
MAX_LOSS_POINTS = 1.0
# Whether the Scheduler's early stopping ends a round on a valid prose draft and a valid program agreeing.
DEFAULT_CROSS_MODAL = SchedulerSettings.model_fields["cross_modal_quorum"].default
# The confidence stop as the Scheduler runs it: on or off by default, with the floors of the default model's profile.
DEFAULT_CONFIDENCE_STOP = SchedulerSettings.model_fields["confidence_stop"].default
# The model eval-200 and the tuning blocks were drafted with (`embedded` named it then): its floors, its step times.
RECORDED_MODEL = "qwen2.5-coder-0.5b"
CONFIDENCE_FLOORS = confidence_floors(RECORDED_MODEL)


@dataclass(frozen=True)
class Draft:
    tokens: int
    valid: bool
    answer: str
    stop_share: float | None  # where the prefix check stops it, as a share of its text; None: it never fails early
    record: Mapping | None = field(default=None, compare=False, repr=False)  # as recorded, for the selection policy

    @property
    def kind(self) -> str:
        return (self.record or {}).get("kind") or "prose"

    @property
    def confidence_stop(self) -> int | None:
        """The tokens after which the confidence stop cuts it (before its end), or None."""
        series = ((self.record or {}).get("confidence") or {}).get("token_confidences")
        floor = CONFIDENCE_FLOORS.get(self.kind)
        at = confidence_stop_point(series, floor) if series and floor is not None else None
        return at if at is not None and at < self.tokens else None


@dataclass(frozen=True)
class Round:
    gold: str
    drafts: list[Draft]


@dataclass(frozen=True)
class Cost:
    tokens: int
    seconds: float  # decoding time of the round
    answers: list[str]  # the answers of the drafts that finished and passed, in the order they finished
    quorum: bool
    finished: tuple[int, ...] = ()  # the drafts that finished whole (passed or not), in the order they finished


def prefix_stop_share(text: str) -> float | None:
    """The share of `text` generated when the arithmetic prefix check fails on it, or None."""
    growing = GrowingDraft((ArithmeticPrefix(),))
    for start in range(0, len(text), PIECE_CHARS):
        if failure := growing.extend(text[start : start + PIECE_CHARS], 1):
            return failure.chars / len(text)
    return None


def round_of(record: dict, mix: tuple[int, int] = DEFAULT_MIX) -> Round:
    """The first round's drafts of one problem (a re-draft round depends on the first one's outcome); of a round
    recorded with both kinds (`make eval-200`: 4 prose drafts, 4 programs), those of `mix` (prose, programs)."""
    solve = record["solve"]
    recorded = first_of_kinds(solve, *mix) if mixes(solve) else solve["drafts"]
    drafts = [
        Draft(d["completion_tokens"], d["valid"], d["answer"], prefix_stop_share(d["text"]), d)
        for d in recorded
        if d["round"] == 0
    ]
    return Round(record["gold"], drafts)


def rounds_of_judge_dataset(directory: Path, drafts_per_round: int) -> list[Round]:
    """Rounds from a judge dataset (`make dataset`: drafts of one problem written side by side, each with the rules'
    verdict): the first `drafts_per_round` drafts of every GSM8K problem."""
    by_problem: dict[str, list[dict]] = {}
    for split in ("train", "validation"):
        for record in read_runs(directory / f"{split}.jsonl"):
            if record["meta"]["source"] == "gsm8k":
                by_problem.setdefault(record["meta"]["problem_id"], []).append(record)
    rounds = []
    for records in by_problem.values():
        drafts = [
            Draft(
                r["meta"]["completion_tokens"],
                r["meta"]["rules_valid"],
                r["meta"]["answer"],
                prefix_stop_share(r["draft"]),
            )
            for r in records[:drafts_per_round]
        ]
        rounds.append(Round(records[0]["meta"]["gold"], drafts))
    return rounds


def replay(
    drafts: list[Draft],
    step_seconds: list[float],
    quorum: int,
    clairvoyant: bool,
    cross_modal: bool = False,
    confidence: bool = False,
) -> Cost:
    """Decodes the round step by step; a draft stops at its failure, and the quorum rule ends the round (quorum 0:
    never, and no draft stops early: the round without early stopping); with `cross_modal`, so does a valid prose
    draft agreeing with a valid program; with `confidence`, a draft also stops where its confidence falls."""
    stop_at = []  # the tokens each draft generates before it ends or is stopped on its own failure
    for draft in drafts:
        if quorum and clairvoyant and not draft.valid:
            stop_at.append(0)
            continue
        stops = [draft.tokens]
        if quorum and not clairvoyant and draft.stop_share is not None:
            stops.append(max(1, round(draft.tokens * draft.stop_share)))
        if confidence and draft.confidence_stop is not None:
            stops.append(draft.confidence_stop)
        stop_at.append(min(stops))
    generating = {i for i, stop in enumerate(stop_at) if stop > 0}
    answers, kinds, finished, tokens, seconds, step = [], [], [], 0, 0.0, 0
    while generating:
        step += 1
        tokens += len(generating)
        seconds += step_seconds[min(len(generating), len(step_seconds)) - 1]
        for i in sorted(i for i in generating if step == stop_at[i]):
            generating.discard(i)
            if stop_at[i] == drafts[i].tokens:  # finished whole
                finished.append(i)
                if drafts[i].valid:  # and passed every hard rule
                    answers.append(drafts[i].answer)
                    kinds.append(drafts[i].kind)
        if quorum and generating and quorum_reason(answers, len(generating), quorum, kinds if cross_modal else ()):
            return Cost(tokens, seconds, answers, quorum=True, finished=tuple(finished))
    return Cost(tokens, seconds, answers, quorum=False, finished=tuple(finished))


def ratios(
    rounds: list[Round], full: list[Cost], step_seconds: list[float], quorum: int | None, clairvoyant: bool
) -> dict:
    """`rounds` replayed with early stopping against `full`, their replay without."""
    cross_modal = quorum is None and DEFAULT_CROSS_MODAL  # as live: it joins the default quorum only
    stopped = [
        replay(r.drafts, step_seconds, quorum or default_quorum(len(r.drafts)), clairvoyant, cross_modal)
        for r in rounds
    ]

    def accuracy(costs: list[Cost]) -> float:
        right = sum(same_answer(majority(c.answers), r.gold) for c, r in zip(costs, rounds, strict=True))
        return round(100 * right / len(rounds), 1)

    def answer(cost: Cost) -> str | None:
        return answer_key(majority(cost.answers))

    return {
        "token_ratio": round(sum(c.tokens for c in stopped) / sum(c.tokens for c in full), 3),
        "latency_ratio": round(sum(c.seconds for c in stopped) / sum(c.seconds for c in full), 3),
        "quorum_reached": sum(c.quorum for c in stopped),
        "vote_accuracy_with": accuracy(stopped),
        "vote_accuracy_without": accuracy(full),
        "vote_changed": sum(answer(s) != answer(f) for s, f in zip(stopped, full, strict=True)),
    }


def sequential_token_ratio(rounds: list[Round], quorum: int | None) -> float:
    """Tokens when the drafts run one after another and the round ends once the quorum rule holds with the drafts
    not yet started counted as still to come (adaptive self-consistency), ÷ tokens of every draft."""
    used = full = 0
    for r in rounds:
        needed = default_quorum(len(r.drafts)) if quorum is None else quorum
        full += sum(d.tokens for d in r.drafts)
        for count in range(1, len(r.drafts) + 1):
            answers = [d.answer for d in r.drafts[:count] if d.valid]
            if count == len(r.drafts) or quorum_reason(answers, len(r.drafts) - count, needed):
                used += sum(d.tokens for d in r.drafts[:count])
                break
    return round(used / full, 3)


def selected_right(round_: Round, cost: Cost) -> bool:
    """Whether the default selection policy, ranking the drafts that finished whole, picks the gold answer (the
    pipeline's selection as `make eval-headline` replays it; refinement is not replayed)."""
    finished = [round_.drafts[i].record for i in cost.finished]
    selection = rank(finished, DEFAULT_POLICY) if finished else None
    return bool(selection and selection.selected) and same_answer(selection.selected[0].answer, round_.gold)


def mix_name(mix: tuple[int, int], cross_modal: bool = False, confidence: bool = False) -> str:
    """`4+1`: 4 prose drafts and 1 program; `4+1+x`: with the cross-modal quorum as well; `+c`: and the confidence
    stop."""
    return f"{mix[0]}+{mix[1]}{'+x' if cross_modal else ''}{'+c' if confidence else ''}"


def mix_rows(records: list[dict], step_seconds: list[float]) -> dict[str, dict]:
    """Each mix of a round of 5 (prose + programs) with the default early stopping, and with a valid prose draft
    agreeing with a valid program ending the round too (cross-modal quorum), each with and without the confidence
    stop, against the previous default round
    (4 + 1, every draft to its end) on the same recorded drafts: tokens, decoding time, and the accuracy of the
    default selection over the drafts that finished, paired problem by problem."""
    usable = [r for r in records if set(ROUND_MIXES) <= set(mixes(r["solve"]))]
    if not usable:
        return {}
    before = [round_of(r, PREVIOUS_MIX) for r in usable]
    before_costs = [replay(r.drafts, step_seconds, 0, clairvoyant=False) for r in before]
    right_before = [selected_right(r, c) for r, c in zip(before, before_costs, strict=True)]
    rows = {}
    for mix, cross_modal, confidence in itertools.product(ROUND_MIXES, (False, True), (False, True)):
        rounds = [round_of(r, mix) for r in usable]
        quorums = [default_quorum(len(r.drafts)) for r in rounds]
        costs = [
            replay(r.drafts, step_seconds, q, False, cross_modal, confidence)
            for r, q in zip(rounds, quorums, strict=True)
        ]
        right = [selected_right(r, c) for r, c in zip(rounds, costs, strict=True)]
        _, low, high = paired_bootstrap(right, right_before)
        rows[mix_name(mix, cross_modal, confidence)] = {
            "n": len(usable),
            "token_ratio": round(sum(c.tokens for c in costs) / sum(c.tokens for c in before_costs), 3),
            "latency_ratio": round(sum(c.seconds for c in costs) / sum(c.seconds for c in before_costs), 3),
            "tokens_per_problem": round(sum(c.tokens for c in costs) / len(usable), 1),
            "quorum_reached": sum(c.quorum for c in costs),
            "right_before": sum(right_before),
            "right_with": sum(right),
            "accuracy_change_points": round(100 * (sum(right) - sum(right_before)) / len(usable), 1),
            "accuracy_change_interval": [round(100 * low, 1), round(100 * high, 1)],
        }
    return rows


def cheapest_within_allowance(rows: dict[str, dict], max_loss_points: float = MAX_LOSS_POINTS) -> str | None:
    """The mix with the fewest tokens whose accuracy change is at least `-max_loss_points` (ties: the more accurate)."""
    allowed = [name for name, row in rows.items() if row["accuracy_change_points"] >= -max_loss_points]
    return min(
        allowed, key=lambda name: (rows[name]["token_ratio"], -rows[name]["accuracy_change_points"]), default=None
    )


def mix_comparison(scored: list[dict], calibration_runs: list[Path], step_seconds: list[float]) -> dict | None:
    """Every mix on the calibration runs (the tuning blocks, never scored), the cheapest within the allowance chosen
    there, and every mix on the scored runs; None where the scored runs hold one kind of draft only."""
    scored_rows = mix_rows(scored, step_seconds)
    if not scored_rows:
        return None
    calibration = [r for path in calibration_runs if runs_present(path) for r in gsm8k_records(path)]
    on_calibration = mix_rows(calibration, step_seconds)
    return {
        "previous": mix_name(PREVIOUS_MIX),
        "default": mix_name(DEFAULT_MIX, DEFAULT_CROSS_MODAL, DEFAULT_CONFIDENCE_STOP),
        "confidence_floors": CONFIDENCE_FLOORS,
        "max_loss_points": MAX_LOSS_POINTS,
        "calibration_runs": [path.name for path in calibration_runs if runs_present(path)],
        "chosen_on_calibration": cheapest_within_allowance(on_calibration),
        "calibration": on_calibration,
        "scored": scored_rows,
    }


def gsm8k_records(path: Path) -> list[dict]:
    return [r for r in read_runs(path) if r.get("task") == "gsm8k" and r.get("solve", {}).get("drafts")]


def measure_step_seconds(max_sequences: int, model: str) -> list[float]:
    """Seconds of one decoding step with 1…max_sequences sequences side by side, on the default engine and model:
    the difference between a long and a short generation, so prompt evaluation cancels out."""
    from deliberate.engines.base import SamplingParams
    from deliberate.engines.llamacpp_engine import LlamaCppEngine
    from deliberate_bench.inputs import draft_prompts, timed_generate

    engine = LlamaCppEngine.load(model)
    prompts = draft_prompts(engine, max_sequences)
    steps = []
    for count in range(1, max_sequences + 1):
        timed = {}
        for tokens in (SHORT_TOKENS, LONG_TOKENS):
            params = SamplingParams(temperature=0.3, max_new_tokens=tokens, min_new_tokens=tokens, seed=1)
            timed[tokens] = min(timed_generate(engine, prompts[:count], params) for _ in range(TRIES))
        steps.append(round((timed[LONG_TOKENS] - timed[SHORT_TOKENS]) / (LONG_TOKENS - SHORT_TOKENS), 5))
    return steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        type=Path,
        default=LAB_FILES / "eval-gsm8k-200.runs.jsonl",
        help="an evaluation's runs file, or a judge dataset's directory (its first --drafts drafts per problem)",
    )
    parser.add_argument("--drafts", type=int, default=5, help="drafts per round taken from a judge dataset")
    parser.add_argument("--model", default=RECORDED_MODEL, help="the model whose decoding steps are timed")
    parser.add_argument(
        "--step-seconds", help="comma-separated seconds of a decoding step with 1, 2, … sequences (default: measured)"
    )
    parser.add_argument(
        "--calibrate",
        type=Path,
        nargs="*",
        default=list(TUNING_RUNS),
        help="runs files the round's mix is chosen on (default: the tuning blocks, make eval-tuning, eval-tuning-2)",
    )
    parser.add_argument("--out", default="early_stop_bound")
    args = parser.parse_args(argv)
    records = [] if args.runs.is_dir() else gsm8k_records(args.runs)
    rounds = rounds_of_judge_dataset(args.runs, args.drafts) if args.runs.is_dir() else [round_of(r) for r in records]
    rounds = [r for r in rounds if r.drafts]
    drafts = [d for r in rounds for d in r.drafts]
    if args.step_seconds:
        step_seconds = [float(s) for s in args.step_seconds.split(",")]
    else:
        step_seconds = measure_step_seconds(max(len(r.drafts) for r in rounds), args.model)
    full = [replay(r.drafts, step_seconds, 0, clairvoyant=False) for r in rounds]
    default = ratios(rounds, full, step_seconds, None, clairvoyant=False)
    mixed = mix_comparison(records, args.calibrate, step_seconds) if records else None
    result = {
        "n": len(rounds),
        # The default round (the Scheduler's mix of prose drafts and programs, its early stopping) against the
        # previous default round (4 + 1, every draft to its end), the default selection's accuracy; runs with one
        # kind of draft: the early stopping alone against every draft to its end, the plain vote's accuracy.
        "default_token_ratio": mixed["scored"][mixed["default"]]["token_ratio"] if mixed else default["token_ratio"],
        "default_accuracy_change_points": (
            mixed["scored"][mixed["default"]]["accuracy_change_points"]
            if mixed
            else round(default["vote_accuracy_with"] - default["vote_accuracy_without"], 1)
        ),
        "default_latency_ratio": mixed["scored"][mixed["default"]]["latency_ratio"]
        if mixed
        else default["latency_ratio"],
        "mix": mixed,
        # The early stopping alone, on the default mix: with ÷ every draft of that mix to its end.
        "rules": default,
        "clairvoyant": ratios(rounds, full, step_seconds, None, clairvoyant=True),
        "by_quorum": {
            str(quorum): {
                "rules": ratios(rounds, full, step_seconds, quorum, clairvoyant=False),
                "clairvoyant": ratios(rounds, full, step_seconds, quorum, clairvoyant=True),
            }
            for quorum in QUORUMS_COMPARED
        },
        "sequential_token_ratio": sequential_token_ratio(rounds, None),
        "drafts": len(drafts),
        "drafts_valid": sum(d.valid for d in drafts),
        "drafts_stopped_by_prefix_check": sum(d.stop_share is not None for d in drafts),
        "drafts_stopped_by_confidence": sum(d.confidence_stop is not None for d in drafts),
        "right_drafts_stopped_by_confidence": sum(
            d.confidence_stop is not None and same_answer(d.answer, r.gold) for r in rounds for d in r.drafts
        ),
        "mean_share_generated_before_the_prefix_check_fails": round(
            statistics.fmean(d.stop_share for d in drafts if d.stop_share is not None), 3
        ),
        "token_share_of_valid_drafts": round(
            sum(d.tokens for d in drafts if d.valid) / sum(d.tokens for d in drafts), 3
        ),
        "step_seconds": step_seconds,
        "runs": args.runs.name,
        "model": args.model,
    }
    print(json.dumps(result, indent=2))
    write_result(args.out, result)


if __name__ == "__main__":
    main()
