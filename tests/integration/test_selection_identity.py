"""The Scheduler, through its real gRPC path, and the replay (deliberate_bench/eval/replay.py) pick the same drafts
in the same order, with the same ranking values, under every registered selection policy.

The Drafter and Refiner run the `recorded` engine on first-round drafts of two GSM8K problems recorded by
`deliberate bench eval` (bench/studies/gsm8k-headline/eval-gsm8k-100.runs.jsonl): the real services draft, verify,
rank and refine them, without a model, in seconds. Each response becomes runs-file records by the evaluation's own
`solve()`, and those records are replayed.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from deliberate.cli.stack import Ports, Stack
from deliberate.drafter.prompts import DEFAULT_STRATEGIES
from deliberate.selection import POLICIES
from deliberate.selection.answers import answer_key
from deliberate_bench.eval import calls
from deliberate_bench.eval.replay import replay
from deliberate_bench.results import read_runs
from deliberate_client.client import DeliberateClient, build_request

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "bench/studies/gsm8k-headline/eval-gsm8k-100.runs.jsonl"
NUM_DRAFTS = 5
# Their five first-round drafts reach 3-4 different answers and one fails a hard rule. The arithmetic check verifies
# two drafts that the vote does not put first, so `majority` selects otherwise than `best_of` (and `weighted`, which
# also ranks checked drafts first) whatever the verification latencies; in 3 of 3 trial runs all three differed.
PROBLEMS = ("train:4335", "train:5353")
STRATEGIES = list(DEFAULT_STRATEGIES[:NUM_DRAFTS])  # what the recording's Drafter gave drafts 0..4 (no hints)


def recorded_problems() -> dict[str, dict]:
    """Problem id → {"question", "texts": draft index → text} of the recorded first round."""
    problems = {}
    for record in read_runs(RUNS):
        if record.get("task") == "gsm8k" and record["id"] in PROBLEMS:
            drafts = [d for d in record["solve"]["drafts"] if d["round"] == 0]
            problems[record["id"]] = {
                "question": record["question"],
                "texts": {d["index"]: d["text"].strip() for d in drafts},
                "drafts": drafts,
            }
    return problems


RECORDED = recorded_problems()


def test_the_recording_has_disagreeing_and_invalid_drafts():
    assert {"weighted", "best_of", "majority"} <= set(POLICIES)
    assert set(RECORDED) == set(PROBLEMS)
    assert len(set(STRATEGIES)) == NUM_DRAFTS  # each draft's prompt names one recorded draft
    for problem in RECORDED.values():
        drafts = problem["drafts"]
        assert sorted(problem["texts"]) == list(range(NUM_DRAFTS))
        assert len({answer_key(d["answer"] or "") for d in drafts}) >= 2
        assert not all(d["valid"] for d in drafts)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    directory = tmp_path_factory.mktemp("selection-identity")
    recording = directory / "drafts.jsonl"
    recording.write_text(
        "".join(
            json.dumps({"question": p["question"], "strategy": STRATEGIES[index], "text": text}) + "\n"
            for p in RECORDED.values()
            for index, text in sorted(p["texts"].items())
        )
    )
    running = Stack(
        ports=Ports.free(),
        env={"DELIBERATE_ENGINE": "recorded", "DELIBERATE_MODEL": str(recording)},
        log_dir=directory / "logs",
        state_dir=directory / "state",
        scheduler_args=["--max-redrafts", "0"],  # one round: every draft is a recorded one
        with_gateway=False,
    )
    with running:
        yield running


@pytest.fixture(scope="module")
def solved(stack) -> dict[tuple[str, str], tuple[dict, object]]:
    """(problem id, policy) → (the evaluation's record of the Solve, the SolveResponse)."""
    results = {}
    with DeliberateClient(stack.address) as client:
        # calls.solve() calls `services.scheduler.Solve` and turns the response into runs-file records:
        # given the client's own stub, its records are built from this client's call by the evaluation's code.
        services = SimpleNamespace(scheduler=client.stub)
        settings = SimpleNamespace(timeout_s=60.0)
        for problem_id, problem in RECORDED.items():
            for policy in POLICIES:
                request = build_request(
                    problem["question"],
                    num_drafts=NUM_DRAFTS,
                    strategy_hints=STRATEGIES,
                    selection_policy=policy,
                    request_id=f"identity-{problem_id.replace(':', '-')}-{policy}",
                )
                request.disable_quorum = True  # every draft is generated to its end
                request.disable_consensus_prefix = True
                request.program_drafts = 0  # the recorded drafts are prose
                record, response = calls.solve(services, settings, request)
                assert response is not None, record.get("error")
                results[problem_id, policy] = record, response
    return results


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("problem_id", PROBLEMS)
def test_the_scheduler_selects_as_the_replay_does(solved, problem_id, policy):
    record, response = solved[problem_id, policy]
    drafts = record["drafts"]
    assert response.selection_policy == policy
    assert sorted((d["round"], d["index"]) for d in drafts) == [(0, i) for i in range(NUM_DRAFTS)]

    # The engine replayed the recorded texts (a draft streaming verification stopped keeps a prefix of its own).
    recorded = RECORDED[problem_id]["texts"]
    for report in response.drafts:
        text, wanted = report.draft.text, recorded[report.draft.index]
        assert text == wanted or (report.HasField("aborted") and wanted.startswith(text)), report.draft.index

    replayed = replay(drafts, policy, overrides=None)
    place = {r.draft.id: (r.round, r.draft.index) for r in response.drafts}
    assert [place[draft_id] for draft_id in response.selected_draft_ids] == places(replayed)
    for d in drafts:
        assert d["components"]["final"] == pytest.approx(replayed.finals[f"{d['round']}:{d['index']}"]), d["index"]


def places(selection) -> list[tuple[int, int]]:
    """(round, index) of the drafts a replay selected, best first (its draft ids are "round:index")."""
    return [(int(r), int(i)) for r, i in (c.draft_id.split(":") for c in selection.selected)]


def test_the_drafts_tell_the_policies_apart(solved):
    """Not a vacuous identity: on the drafts the services produced, an invalid one among answers that disagree,
    the policies select differently."""
    for problem_id in PROBLEMS:
        drafts = solved[problem_id, "weighted"][0]["drafts"]
        assert not all(d["valid"] for d in drafts)
        assert len({answer_key(d["answer"] or "") for d in drafts if d["valid"]}) >= 2
        chosen = {policy: places(replay(drafts, policy)) for policy in POLICIES}
        assert len({tuple(c) for c in chosen.values()}) >= 2, chosen
        assert chosen["majority"] != chosen["best_of"], chosen
