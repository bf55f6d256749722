"""The four services as real OS processes on free loopback ports, exporting real OTLP spans to a
receiver that runs inside the test process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deliberate.cli.stack import Ports, Stack
from tests.otlp import serving_receiver

ROOT = Path(__file__).resolve().parents[2]
GSM8K = [ROOT.parent / "shared/data/gsm8k/train.jsonl", ROOT / "tests/data/gsm8k_sample.jsonl"]


def gsm8k_questions(count: int) -> list[dict]:
    path = next(p for p in GSM8K if p.exists())
    with path.open() as lines:
        return [json.loads(line) for _, line in zip(range(count), lines, strict=False)]


@pytest.fixture(scope="session")
def otlp_receiver():
    with serving_receiver() as receiver:
        yield receiver


@pytest.fixture(scope="session", autouse=True)
def refined_answers():
    """The integration tests exercise all four services, so their Schedulers refine (`--final-text refine`): the
    deployed default, `pass_through`, calls no Refiner. test_final_text_ways asks for each way by request, and
    tests/bench/test_refine_ways.py checks that the default is the way the measurement chose."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DELIBERATE_FINAL_TEXT", "refine")
        yield


@pytest.fixture(scope="session", autouse=True)
def rounds_all_at_once():
    """The integration tests exercise the all-at-once round's mechanics (streaming verification, the quorum,
    replacements, replicas) on every request, so their Schedulers start all N drafts at once (`--draft-count
    all_at_once`); the deployed default, the cascade, is asked for by request in test_cascade."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DELIBERATE_DRAFT_COUNT", "all_at_once")
        yield


@pytest.fixture(scope="session")
def stack(refined_answers, rounds_all_at_once, otlp_receiver, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("service-logs")
    # The test model's profile has no confidence floors, so the confidence stop never fires on its own; here it is
    # off unless a request asks, with a prose floor above any token confidence and no program floor, so a request
    # that asks stops every prose draft at its first judged token (test_early_stop).
    env = {
        **otlp_receiver.exporter_env(),
        "DELIBERATE_CONFIDENCE_STOP": "false",
        "DELIBERATE_CONFIDENCE_FLOORS": "prose=1000",
        # test_cascade's cascade: two greedy drafts first, then two at a time, settled by two agreeing (the small
        # model's confidence says little; the deployed policy is the replay's choice: test_cascade_replay.py)
        "DELIBERATE_CASCADE_POLICY": "cscscscs/start2/step2/q2+x/greedy",
    }
    with Stack(ports=Ports.free(), env=env, log_dir=log_dir) as running:
        yield running
        for service, process in running.processes.items():
            assert process.poll() is None, f"{service} died during the tests; see {log_dir}"
