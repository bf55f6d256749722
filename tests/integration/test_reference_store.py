"""The ad-selection pack reads its catalog from a real Redis (the reference store): through a real Verifier
process, across catalog loads made while verifications run, and with Redis stopped or hanging."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import grpc
import pytest

from deliberate.cli.stack import Ports, Stack
from deliberate.decisions.reference import ReferenceStore
from deliberate.rule_packs.ad_selection import catalog_store
from deliberate.rule_packs.ad_selection.catalog import Ad
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.rules import verify
from deliberate_api.common.v1 import common_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

LOOKUP_TIMEOUT_S = 0.3
PLAN = '{"selected_ids": [1, 2, 3, 4, 5]}'
CATEGORIES = ("travel", "finance", "retail", "auto", "food", "tech")


def catalog(cost: int, ctr: float, size: int = 5) -> list[dict]:
    return [{"id": i, "cost": cost, "ctr": ctr, "category": CATEGORIES[i - 1]} for i in range(1, size + 1)]


def load_with_the_command(url: str, rows: list[dict], tmp_path) -> str:
    path = tmp_path / f"catalog-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(rows))
    done = subprocess.run(
        [sys.executable, "-m", "deliberate.rule_packs.ad_selection", "load", "--url", url, "--catalog", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def verifier(redis_server, tmp_path):
    """A lone Verifier process whose ad-selection pack reads the catalog from `redis_server`."""
    stack = Stack(
        ports=Ports.free(),
        env={"DELIBERATE_REFERENCE_URL": redis_server.url, "DELIBERATE_REFERENCE_TIMEOUT_S": str(LOOKUP_TIMEOUT_S)},
        log_dir=tmp_path / "logs",
    )
    stack.start("verifier")
    try:
        stack.wait_healthy(60, services=("verifier",))
        yield stack
    finally:
        stack.down()


def verify_plan(stack: Stack, text: str = PLAN) -> common_pb2.DraftVerdict:
    request = verifier_service_pb2.VerifyDraftsRequest(
        prompt="Select 5 ads.",
        drafts=[common_pb2.Draft(id="d0", text=text)],
        constraints=[common_pb2.Constraint(rule_pack="ad_selection")],
    )
    with grpc.insecure_channel(stack.address_of("verifier")) as channel:
        return verifier_service_pb2_grpc.VerifierServiceStub(channel).VerifyDrafts(request, timeout=30).verdicts[0]


def messages(verdict: common_pb2.DraftVerdict) -> dict[str, str]:
    return {r.rule_id: r.message for r in verdict.rule_results}


def test_the_verifier_checks_against_the_catalog_loaded_into_redis(verifier, redis_server, tmp_path):
    with urllib.request.urlopen(f"http://127.0.0.1:{verifier.ports.verifier_http}/health", timeout=5) as reply:
        assert json.load(reply)["reference"] == f"Redis at {redis_server.url}"

    nothing_loaded = verify_plan(verifier)
    assert not nothing_loaded.valid
    assert messages(nothing_loaded)["catalog_check"] == (
        f"catalog_check failed: reference data unavailable: Redis at {redis_server.url}: key "
        f"{catalog_store.CURRENT} is missing; no ad catalog has been loaded; load a catalog with "
        "`python -m deliberate.rule_packs.ad_selection load`"
    )

    output = load_with_the_command(redis_server.url, catalog(cost=1000, ctr=0.02), tmp_path)
    loaded = rf"loaded 5 ads into Redis at {re.escape(redis_server.url)} as version 1-[0-9a-f]{{8}}; it is now current"
    assert re.fullmatch(loaded, output.strip()), output
    first = messages(verify_plan(verifier))
    assert first["budget_check"] == "budget_check passed: total cost 5,000 is within the budget 5,000"
    assert first["ctr_total"] == "ctr_total passed: total ctr=0.1000"
    # Id 6 is in the shipped catalog, not in the one in Redis.
    assert messages(verify_plan(verifier, '{"selected_ids": [1, 2, 3, 4, 6]}'))["catalog_check"] == (
        "catalog_check failed: id 6 is not in the catalog"
    )

    load_with_the_command(redis_server.url, catalog(cost=1001, ctr=0.02), tmp_path)
    after_reload = verify_plan(verifier)  # the same Verifier, no restart
    assert not after_reload.valid
    assert messages(after_reload)["budget_check"] == "budget_check failed: total cost 5,005 is 5 over the budget 5,000"

    # Redis restarts empty and counts versions from 1 again: its new catalog is not taken for the old version 1.
    redis_server.stop()
    shutil.rmtree(redis_server.data_dir)  # its append-only file: it restarts with nothing
    redis_server.start()
    load_with_the_command(redis_server.url, catalog(cost=900, ctr=0.02), tmp_path)
    assert messages(verify_plan(verifier))["budget_check"] == (
        "budget_check passed: total cost 4,500 is within the budget 5,000"
    )


def test_a_verification_never_mixes_two_catalog_versions_loaded_while_it_runs(redis_server):
    cheap, dear = catalog(cost=100, ctr=0.01), catalog(cost=1000, ctr=0.05)
    consistent = {
        ("total cost 500 is within the budget 5,000", "total ctr=0.0500"),  # every check read `cheap`
        ("total cost 5,000 is within the budget 5,000", "total ctr=0.2500"),  # every check read `dear`
    }
    store = ReferenceStore(redis_server.url, timeout_s=2.0)
    loader = ReferenceStore(redis_server.url, timeout_s=2.0)
    catalog_store.load(loader, [Ad(**row) for row in cheap])
    rule_set = compile_rules("", [ConstraintSpec(0, "rule_pack", "ad_selection")], {}, {"reference": store})
    assert rule_set.waits_on_network
    stop = threading.Event()

    def keep_loading() -> int:
        loads = 0
        while not stop.is_set():
            catalog_store.load(loader, [Ad(**row) for row in (dear if loads % 2 == 0 else cheap)])
            loads += 1
        return loads

    seen: list[tuple[str, str]] = []

    def keep_verifying() -> None:
        for _ in range(400):
            outcomes = {o.rule_id: o.message for o in verify(PLAN, rule_set.rules, "stop", None, {}).outcomes}
            seen.append(
                (
                    outcomes["budget_check"].removeprefix("budget_check passed: "),
                    outcomes["ctr_total"].removeprefix("ctr_total passed: "),
                )
            )

    loading = threading.Thread(target=keep_loading)
    verifying = [threading.Thread(target=keep_verifying) for _ in range(3)]
    loading.start()
    for thread in verifying:
        thread.start()
    for thread in verifying:
        thread.join()
    stop.set()
    loading.join()
    store.close()
    loader.close()

    assert set(seen) == consistent, "each verification saw one catalog, and both catalogs were seen"


def test_with_redis_hanging_or_stopped_the_rule_fails_naming_redis_within_the_timeout(verifier, redis_server, tmp_path):
    load_with_the_command(redis_server.url, catalog(cost=1000, ctr=0.02), tmp_path)
    assert verify_plan(verifier).valid

    os.kill(redis_server.process.pid, signal.SIGSTOP)  # accepts connections, answers nothing
    try:
        started = time.monotonic()
        hanging = verify_plan(verifier)
        waited = time.monotonic() - started
    finally:
        os.kill(redis_server.process.pid, signal.SIGCONT)
    assert not hanging.valid
    assert messages(hanging)["catalog_check"].startswith(
        f"catalog_check failed: reference data unavailable: Redis at {redis_server.url}: GET {catalog_store.CURRENT} "
        "failed: TimeoutError:"
    )
    assert messages(hanging)["catalog_check"].endswith(f"(timeout {LOOKUP_TIMEOUT_S:g} s)")
    assert waited < LOOKUP_TIMEOUT_S + 1.5, f"the verification waited {waited:.2f}s"

    redis_server.stop()
    started = time.monotonic()
    stopped = verify_plan(verifier)
    assert time.monotonic() - started < LOOKUP_TIMEOUT_S + 1.5
    assert not stopped.valid
    assert messages(stopped)["catalog_check"].startswith(
        f"catalog_check failed: reference data unavailable: Redis at {redis_server.url}: GET {catalog_store.CURRENT} "
        "failed: ConnectionError:"
    )
    assert "budget_check" not in messages(stopped), "the hard failure stops the run"
    assert verifier.is_serving("verifier")
