"""The Kubernetes manifests under deploy/k8s, rendered by kustomize and checked for what the services need.

Rendering runs `kubectl kustomize` (from the dev extras) once per overlay for the whole module.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import cel
import pytest
import yaml

from deliberate.core.ports import GATEWAY_PORT, SERVICE_PORTS

REPO_ROOT = Path(__file__).resolve().parents[2]
RENDER_PY = REPO_ROOT / "deploy" / "k8s" / "render.py"

SERVICES = {name: ports.grpc for name, ports in SERVICE_PORTS.items()}  # the gateway (GATEWAY_PORT) is HTTP, not gRPC
ENGINE_SERVICES = ("drafter", "refiner")
SAFE_RETRY_CONDITIONS = {"connect-failure", "refused-stream", "unavailable"}
HEALTHCHECK = ["python", "-m", "deliberate.core.healthcheck"]
TLS_DIR = "/etc/deliberate/tls"
CLUSTER_SCOPED = {"Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
# The Scheduler's back-ends, each with a headless Service beside its ClusterIP one (docs/deploy.md#load-balancing).
BALANCED = ("drafter", "verifier", "refiner")
HEADLESS = {f"{name}-headless" for name in BALANCED}


def load_render():
    spec = importlib.util.spec_from_file_location("deliberate_k8s_render", RENDER_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render = load_render()


@pytest.fixture(scope="module")
def checked() -> dict[str, tuple[list[dict], list[str]]]:
    """Overlay name → (objects, validation problems)."""
    results = {}
    for name, directory in render.OVERLAYS.items():
        _, objects, problems = render.check(directory)
        results[name] = (objects, problems)
    return results


@pytest.fixture(scope="module")
def rendered(checked) -> dict[str, list[dict]]:
    return {name: objects for name, (objects, _) in checked.items()}


def of_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def one(objects: list[dict], kind: str, name: str) -> dict:
    found = of_kind(objects, kind)
    assert name in found, f"no {kind}/{name}; have {sorted(found)}"
    return found[name]


def container(objects: list[dict], service: str) -> dict:
    (main,) = one(objects, "Deployment", service)["spec"]["template"]["spec"]["containers"]
    return main


def env(objects: list[dict], service: str) -> dict[str, str]:
    """The container's environment as the pod would see it: envFrom ConfigMaps, then env values."""
    configmaps = of_kind(objects, "ConfigMap")
    spec = container(objects, service)
    values: dict[str, str] = {}
    for source in spec.get("envFrom", []):
        name = source["configMapRef"]["name"]
        assert name in configmaps, f"{service} reads ConfigMap {name}, which is not rendered"
        values.update(configmaps[name]["data"])
    for item in spec.get("env", []):
        reference = item.get("valueFrom", {}).get("configMapKeyRef")
        values[item["name"]] = (
            configmaps[reference["name"]]["data"][reference["key"]] if reference else item.get("value", "<valueFrom>")
        )
    return values


# --- validation --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_overlay_renders_and_validates(checked, overlay):
    objects, problems = checked[overlay]
    assert problems == []
    assert len(objects) > 20


def test_base_has_every_object_the_services_need(rendered):
    objects = rendered["base"]
    assert set(of_kind(objects, "Namespace")) == {"deliberate"}
    assert set(of_kind(objects, "Deployment")) == {*SERVICES, "gateway"}
    assert set(of_kind(objects, "StatefulSet")) == {"redis"}
    for kind in ("ServiceAccount", "PodDisruptionBudget"):
        assert set(of_kind(objects, kind)) == {*SERVICES, "gateway", "redis"}, kind
    assert set(of_kind(objects, "Service")) == {*SERVICES, "gateway", "redis", *HEADLESS}
    namespaced = [obj for obj in objects if obj["kind"] not in CLUSTER_SCOPED]
    assert {obj["metadata"].get("namespace") for obj in namespaced} == {"deliberate"}


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_cluster_scoped_objects_have_no_namespace(rendered, overlay):
    # kustomize gives admission policies a namespace unless base/kustomization.yaml takes it off again.
    for obj in rendered[overlay]:
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in obj["metadata"], render.describe(obj)


# --- services, ports, probes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_every_service_exposes_a_grpc_port_that_reaches_its_pods(rendered, overlay):
    objects = rendered[overlay]
    for name, service in of_kind(objects, "Service").items():
        if name in ("redis", "gateway") or name in HEADLESS:
            continue  # not gRPC services: test_schedulers_share_their_state_in_redis, test_the_gateway_…; headless:
            # test_headless_services_reach_every_pod_of_their_backend
        ports = {port["name"]: port for port in service["spec"]["ports"]}
        assert "grpc" in ports, name
        assert ports["grpc"]["port"] == SERVICES[name]
        pod = one(objects, "Deployment", name)["spec"]["template"]
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        container_ports = {port["name"]: port["containerPort"] for port in container(objects, name)["ports"]}
        assert container_ports[ports["grpc"]["targetPort"]] == SERVICES[name]
    verifier_ports = {port["name"]: port["port"] for port in one(objects, "Service", "verifier")["spec"]["ports"]}
    assert verifier_ports["http-health"] == 8081


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_the_gateway_serves_http_and_is_ready_while_the_scheduler_serves(rendered, overlay):
    objects = rendered[overlay]
    service = one(objects, "Service", "gateway")
    (port,) = service["spec"]["ports"]
    assert port["port"] == GATEWAY_PORT and port["appProtocol"] == "http"
    pod = one(objects, "Deployment", "gateway")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    spec = container(objects, "gateway")
    assert {p["name"]: p["containerPort"] for p in spec["ports"]}[port["targetPort"]] == GATEWAY_PORT
    # Readiness follows the Scheduler (GET /health asks its gRPC health); liveness only the gateway's own port.
    assert spec["readinessProbe"]["httpGet"] == {"path": "/health", "port": port["targetPort"]}
    assert spec["livenessProbe"]["tcpSocket"]["port"] == port["targetPort"]
    values = env(objects, "gateway")
    assert values["DELIBERATE_PORT"] == str(GATEWAY_PORT) and values["DELIBERATE_HOST"] == "0.0.0.0"
    assert values["DELIBERATE_SCHEDULER_ADDRESS"] == f"scheduler:{SERVICES['scheduler']}"
    assert spec["image"] == "deliberate-gateway:0.1.0"


def test_verifier_liveness_is_the_http_health_endpoint(rendered):
    for objects in rendered.values():
        liveness = container(objects, "verifier")["livenessProbe"]
        assert liveness["httpGet"]["path"] == "/health"
        assert liveness["httpGet"]["port"] == 8081
        assert liveness["failureThreshold"] == 3
        assert env(objects, "verifier")["DELIBERATE_HTTP_PORT"] == "8081"


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_grpc_probes_ask_the_port_the_service_listens_on(rendered, overlay):
    objects = rendered[overlay]
    for name, port in SERVICES.items():
        spec = container(objects, name)
        probes = {key: spec[key] for key in ("startupProbe", "readinessProbe", "livenessProbe") if key in spec}
        assert "readinessProbe" in probes and "livenessProbe" in probes, name
        for key, probe in probes.items():
            if "grpc" in probe:
                assert probe["grpc"]["port"] == port, (name, key)
        readiness = probes["readinessProbe"]
        if overlay == "tls":  # the image's health check asks 127.0.0.1:$DELIBERATE_PORT, the port served
            assert readiness["exec"]["command"][:3] == HEALTHCHECK, name
        else:
            assert readiness["grpc"]["port"] == port
        if name in ENGINE_SERVICES:
            # The model loads before health says SERVING: allow minutes before liveness starts counting.
            startup = probes["startupProbe"]
            assert startup["periodSeconds"] * startup["failureThreshold"] >= 120, name


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_services_bind_all_interfaces(rendered, overlay):
    for name in SERVICES:
        assert env(rendered[overlay], name)["DELIBERATE_HOST"] == "0.0.0.0", name


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_headless_services_reach_every_pod_of_their_backend(rendered, overlay):
    objects = rendered[overlay]
    for name in BALANCED:
        headless, service = one(objects, "Service", f"{name}-headless"), one(objects, "Service", name)
        assert headless["spec"]["clusterIP"] == "None"  # DNS answers each ready pod's address
        assert headless["spec"]["selector"] == service["spec"]["selector"]
        assert not headless["spec"].get("publishNotReadyAddresses")  # a pod still loading its model is left out
        (port,) = headless["spec"]["ports"]  # gRPC only: the ServiceMonitor scrapes each pod once, via `name`
        assert (port["name"], port["port"], port["targetPort"]) == ("grpc", SERVICES[name], "grpc")


@pytest.mark.parametrize("overlay", [o for o in render.OVERLAYS if o != "istio"])
def test_without_a_mesh_the_scheduler_balances_over_the_headless_services(rendered, overlay):
    objects = rendered[overlay]
    values = env(objects, "scheduler")
    for name in BALANCED:
        assert values[f"DELIBERATE_{name.upper()}_ADDRESS"] == f"dns:///{name}-headless:{SERVICES[name]}"
    # Clients reconnect (and resolve the headless names again) at least once a minute: new pods get calls.
    assert float(env(objects, "scheduler")["DELIBERATE_MAX_CONNECTION_AGE_S"]) == 60
    assert float(env(objects, "drafter")["DELIBERATE_MAX_CONNECTION_AGE_S"]) == 60


def test_with_istio_the_scheduler_calls_the_cluster_ip_services_the_mesh_balances(rendered):
    values = env(rendered["istio"], "scheduler")
    hosts = {vs["spec"]["hosts"][0] for vs in of_kind(rendered["istio"], "VirtualService").values()}
    for name in BALANCED:
        assert values[f"DELIBERATE_{name.upper()}_ADDRESS"] == f"{name}:{SERVICES[name]}"
        assert name in hosts  # its VirtualService (timeouts, retries) applies to exactly this host


def test_scheduler_addresses_name_the_services(rendered):
    objects = rendered["base"]
    values = env(objects, "scheduler")
    for name in BALANCED:
        assert f"{name}-headless:{SERVICES[name]}" in values[f"DELIBERATE_{name.upper()}_ADDRESS"]
        assert name in of_kind(objects, "Service")
    assert values["DELIBERATE_VERIFIER_HEALTH_URL"] == "http://verifier:8081/health"
    assert values["DELIBERATE_RESTARTER"] == "kubernetes"
    assert env(objects, "verifier")["DELIBERATE_RISK_ADDRESS"] == f"risk:{SERVICES['risk']}"


def test_schedulers_share_their_state_in_redis_on_a_persistent_volume(rendered):
    objects = rendered["base"]
    values = env(objects, "scheduler")
    url = values["DELIBERATE_STATE_URL"]
    assert url == "redis://redis:6379/0"
    assert "DELIBERATE_WEIGHTS_PATH" not in values  # no per-pod state file any more
    mounts = {mount["mountPath"] for mount in container(objects, "scheduler")["volumeMounts"]}
    assert mounts == {"/tmp"}
    assert float(values["DELIBERATE_WATCHDOG_LEASE_S"]) > float(values["DELIBERATE_WATCHDOG_INTERVAL_S"])

    service = one(objects, "Service", "redis")
    (port,) = service["spec"]["ports"]
    redis = one(objects, "StatefulSet", "redis")
    pod = redis["spec"]["template"]
    assert port["port"] == 6379 and service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (main,) = pod["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in main["ports"]}[port["targetPort"]] == 6379
    assert main["image"].startswith("docker.io/library/redis:")
    assert main["args"][main["args"].index("--appendonly") + 1] == "yes"
    (claim,) = redis["spec"]["volumeClaimTemplates"]
    data = main["args"][main["args"].index("--dir") + 1]
    assert {m["mountPath"]: m["name"] for m in main["volumeMounts"]}[data] == claim["metadata"]["name"]
    assert redis["spec"]["replicas"] == 1  # one writer: the Lua scripts' atomicity is per Redis


def test_engine_services_have_a_writable_home(rendered):
    for objects in rendered.values():
        for name in ENGINE_SERVICES:
            values = env(objects, name)
            assert values["HOME"] == "/tmp" and values["HF_HOME"].startswith("/tmp/")
            assert "/tmp" in {mount["mountPath"] for mount in container(objects, name)["volumeMounts"]}


# --- security ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_every_container_is_locked_down(rendered, overlay):
    workloads = of_kind(rendered[overlay], "Deployment") | of_kind(rendered[overlay], "StatefulSet")
    for name, deployment in workloads.items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for spec in pod["containers"] + pod.get("initContainers", []):
            context = spec["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["runAsNonRoot"] is True, name
            assert context["runAsUser"] == context["runAsGroup"] == 10001, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            assert context["seccompProfile"]["type"] == "RuntimeDefault", name
            assert {"requests", "limits"} <= spec["resources"].keys(), name


def test_only_the_scheduler_gets_an_api_token(rendered):
    accounts = of_kind(rendered["base"], "ServiceAccount")
    assert {name: account["automountServiceAccountToken"] for name, account in accounts.items()} == {
        "scheduler": True,
        "drafter": False,
        "verifier": False,
        "refiner": False,
        "risk": False,
        "gateway": False,
        "redis": False,
    }
    for name in SERVICES:
        pod = one(rendered["base"], "Deployment", name)["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == name


def test_watchdog_role_is_exactly_get_list_delete_pods(rendered):
    objects = rendered["base"]
    (role,) = of_kind(objects, "Role").values()
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "delete"]}]
    assert not of_kind(objects, "ClusterRole") and not of_kind(objects, "ClusterRoleBinding")
    (binding,) = of_kind(objects, "RoleBinding").values()
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "scheduler", "namespace": "deliberate"}]


def test_watchdog_selector_picks_the_verifier_pods_and_only_those(rendered):
    objects = rendered["base"]
    selector = env(objects, "scheduler")["DELIBERATE_KUBERNETES_SELECTOR"]
    key, value = selector.split("=")
    matching = [
        name
        for name, deployment in of_kind(objects, "Deployment").items()
        if deployment["spec"]["template"]["metadata"]["labels"].get(key) == value
    ]
    assert matching == ["verifier"]


def admission(objects: list[dict]) -> tuple[dict, dict]:
    (policy,) = of_kind(objects, "ValidatingAdmissionPolicy").values()
    (binding,) = of_kind(objects, "ValidatingAdmissionPolicyBinding").values()
    return policy, binding


def test_admission_policy_limits_the_scheduler_to_verifier_pods(rendered):
    objects = rendered["base"]
    policy, binding = admission(objects)
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["DELETE"] and rule["resources"] == ["pods"]
    (validation,) = policy["spec"]["validations"]
    assert "'app.kubernetes.io/name'" in validation["expression"] and "'verifier'" in validation["expression"]
    # The binding picks this namespace by a label the Namespace object really carries.
    namespace = one(objects, "Namespace", "deliberate")
    wanted = binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"]
    assert wanted.items() <= namespace["metadata"]["labels"].items()


def old_pod(name: str, labels: dict | None) -> dict:
    metadata = {"name": name, "namespace": "deliberate"}
    if labels is not None:
        metadata["labels"] = labels
    return {"metadata": metadata}


SCHEDULER_ACCOUNT = "system:serviceaccount:deliberate:scheduler"


@pytest.mark.parametrize(
    ("username", "old_object", "allowed"),
    [
        (SCHEDULER_ACCOUNT, old_pod("verifier-1", {"app.kubernetes.io/name": "verifier"}), True),
        (SCHEDULER_ACCOUNT, old_pod("drafter-1", {"app.kubernetes.io/name": "drafter"}), False),
        (SCHEDULER_ACCOUNT, old_pod("scheduler-1", {"app.kubernetes.io/name": "scheduler"}), False),
        (SCHEDULER_ACCOUNT, old_pod("bare", None), False),
        (SCHEDULER_ACCOUNT, old_pod("other", {"app": "verifier"}), False),
        # Not the scheduler: the policy does not apply, RBAC alone decides.
        (
            "system:serviceaccount:deliberate:verifier",
            old_pod("drafter-1", {"app.kubernetes.io/name": "drafter"}),
            True,
        ),
        ("kubernetes-admin", old_pod("drafter-1", {"app.kubernetes.io/name": "drafter"}), True),
    ],
)
def test_admission_policy_cel_decides_as_intended(rendered, username, old_object, allowed):
    """Evaluates the policy's own CEL expressions (standard CEL, which the `cel` package runs) on DELETE requests."""
    policy, _ = admission(rendered["base"])
    context = {"request": {"userInfo": {"username": username}, "namespace": "deliberate"}, "oldObject": old_object}
    applies = all(cel.evaluate(condition["expression"], context) for condition in policy["spec"]["matchConditions"])
    passes = all(cel.evaluate(validation["expression"], context) for validation in policy["spec"]["validations"])
    assert (not applies or passes) is allowed


# --- scaling and disruption --------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_autoscalers_exist_exactly_for_scheduler_and_drafter(rendered, overlay):
    objects = rendered[overlay]
    autoscalers = of_kind(objects, "HorizontalPodAutoscaler")
    targets = {hpa["spec"]["scaleTargetRef"]["name"] for hpa in autoscalers.values()}
    assert targets == {"scheduler", "drafter"}
    for hpa in autoscalers.values():
        assert hpa["apiVersion"] == "autoscaling/v2"
        target = one(objects, "Deployment", hpa["spec"]["scaleTargetRef"]["name"])
        # A replica count in the manifest would fight the autoscaler on every apply.
        assert "replicas" not in target["spec"]
        assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]


def test_every_deployment_has_a_disruption_budget_selecting_its_pods(rendered):
    objects = rendered["base"]
    budgets = of_kind(objects, "PodDisruptionBudget")
    for name, deployment in (of_kind(objects, "Deployment") | of_kind(objects, "StatefulSet")).items():
        selector = budgets[name]["spec"]["selector"]["matchLabels"]
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


# --- tls -------------------------------------------------------------------------------------------------------
def test_tls_overlay_serves_mutual_tls_on_every_grpc_hop(rendered):
    objects = rendered["tls"]
    for name in SERVICES:
        settings = env(objects, name)
        assert settings["DELIBERATE_TLS_CERT_FILE"] == f"{TLS_DIR}/tls.crt", name
        assert settings["DELIBERATE_TLS_KEY_FILE"] == f"{TLS_DIR}/tls.key", name
        assert settings["DELIBERATE_TLS_CLIENT_CA_FILE"] == f"{TLS_DIR}/ca.crt", name
    for caller in ("scheduler", "gateway", "verifier"):
        settings = env(objects, caller)
        assert settings["DELIBERATE_DOWNSTREAM_TLS_CA_FILE"] == f"{TLS_DIR}/ca.crt", caller
        assert settings["DELIBERATE_DOWNSTREAM_TLS_CERT_FILE"] == f"{TLS_DIR}/client.crt", caller
    for name in (*SERVICES, "gateway"):
        mounts = {m["mountPath"]: m for m in container(objects, name)["volumeMounts"]}
        assert mounts[TLS_DIR]["readOnly"] is True, name
        assert "/tmp" in mounts, f"{name}: the base's writable /tmp must survive the patch"
        volumes = {v["name"]: v for v in one(objects, "Deployment", name)["spec"]["template"]["spec"]["volumes"]}
        assert volumes[mounts[TLS_DIR]["name"]]["secret"]["secretName"] == "deliberate-tls", name


def test_tls_overlay_probes_present_the_client_certificate(rendered):
    # The kubelet's gRPC probes speak plain text only; against an mTLS server they would always fail.
    for name in SERVICES:
        spec = container(rendered["tls"], name)
        for key in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = spec.get(key, {})
            assert "grpc" not in probe, (name, key)
            if "exec" in probe:
                command = probe["exec"]["command"]
                assert command[:3] == HEALTHCHECK and f"{TLS_DIR}/client.crt" in command, (name, key)


def test_only_the_tls_overlay_turns_app_level_tls_on(rendered):
    # In the mesh the sidecars encrypt every hop; app-level TLS there would break the kubelet's probes for nothing.
    for overlay in set(rendered) - {"tls"}:
        for name in (*SERVICES, "gateway"):
            assert not [key for key in env(rendered[overlay], name) if "TLS" in key], (overlay, name)


# --- istio -------------------------------------------------------------------------------------------------------


def test_istio_mesh_is_strict_mutual_tls(rendered):
    objects = rendered["istio"]
    assert one(objects, "Namespace", "deliberate")["metadata"]["labels"]["istio-injection"] == "enabled"
    (peer,) = of_kind(objects, "PeerAuthentication").values()
    assert peer["apiVersion"] == "security.istio.io/v1"
    assert peer["spec"]["mtls"]["mode"] == "STRICT"
    assert "selector" not in peer["spec"]  # namespace-wide
    rules = of_kind(objects, "DestinationRule")
    assert set(rules) == set(SERVICES)
    for name, rule in rules.items():
        assert rule["apiVersion"] == "networking.istio.io/v1"
        assert rule["spec"]["host"] == name
        assert rule["spec"]["trafficPolicy"]["tls"]["mode"] == "ISTIO_MUTUAL"
        assert rule["spec"]["trafficPolicy"]["outlierDetection"]


def seconds(duration: str) -> float:
    assert duration.endswith("s") and not duration.endswith("ms"), duration
    return float(duration[:-1])


def test_istio_routes_have_timeouts_and_only_safe_retries(rendered):
    services = of_kind(rendered["istio"], "VirtualService")
    assert set(services) == set(SERVICES)
    for name, service in services.items():
        assert service["spec"]["hosts"] == [name]
        for route in service["spec"]["http"]:
            assert route["timeout"], name
            conditions = set(route["retries"]["retryOn"].split(","))
            assert conditions <= SAFE_RETRY_CONDITIONS, (name, conditions)
            for destination in route["route"]:
                assert destination["destination"]["host"] == name
    grpc_timeout = {name: seconds(service["spec"]["http"][0]["timeout"]) for name, service in services.items()}
    assert grpc_timeout["scheduler"] >= 300
    assert grpc_timeout["verifier"] <= 5
    verifier_ports = {
        route["route"][0]["destination"]["port"]["number"] for route in services["verifier"]["spec"]["http"]
    }
    assert verifier_ports == {50053, 8081}


def test_istio_overlay_leaves_the_workloads_as_in_base(rendered):
    """But for the Scheduler's three back-end addresses (test_with_istio_the_scheduler_calls_the_cluster_ip_…)."""

    def workloads(objects):
        deployments = copy.deepcopy(of_kind(objects, "Deployment"))
        for deployment in deployments.values():
            deployment["spec"]["template"]["metadata"].pop("annotations", None)
            for item in deployment["spec"]["template"]["spec"]["containers"][0].get("env", []):
                if item["name"] in {f"DELIBERATE_{name.upper()}_ADDRESS" for name in BALANCED}:
                    item["value"] = "<address>"
        return deployments

    assert workloads(rendered["istio"]) == workloads(rendered["base"])


# --- gpu ---------------------------------------------------------------------------------------------------------


def memory_gi(quantity: str) -> float:
    units = {"Mi": 1 / 1024, "Gi": 1}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_gpu_overlay_puts_the_engines_on_gpus_with_vllm(rendered):
    objects = rendered["gpu"]
    for name in ENGINE_SERVICES:
        spec = container(objects, name)
        pod = one(objects, "Deployment", name)["spec"]["template"]["spec"]
        assert spec["image"] == f"deliberate-{name}-cuda:0.1.0"
        assert spec["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        values = env(objects, name)
        assert values["DELIBERATE_ENGINE"] == "vllm"
        model = Path(values["DELIBERATE_MODEL"])
        mounts = {mount["mountPath"]: mount for mount in spec["volumeMounts"]}
        assert mounts[str(model.parent)]["readOnly"] is True
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert volumes[mounts[str(model.parent)]["name"]]["persistentVolumeClaim"]["claimName"] == "models"
        base = container(rendered["base"], name)
        assert memory_gi(spec["resources"]["limits"]["memory"]) > memory_gi(base["resources"]["limits"]["memory"])
    for name in ("scheduler", "verifier"):
        assert container(objects, name) == container(rendered["base"], name)
        assert "nvidia.com/gpu" not in container(objects, name)["resources"]["limits"]


def test_base_engines_stay_on_cpu(rendered):
    for name in ENGINE_SERVICES:
        assert env(rendered["base"], name)["DELIBERATE_ENGINE"] == "llamacpp"
        assert container(rendered["base"], name)["image"] == f"deliberate-{name}:0.1.0"
    # The Qwen GGUFs the image holds: 1.5B drafts, the 0.5B Refiner (docs/models.md#the-frontier-which-model-where).
    assert env(rendered["base"], "drafter")["DELIBERATE_MODEL"] == "embedded"
    assert env(rendered["base"], "refiner")["DELIBERATE_MODEL"] == "qwen2.5-coder-0.5b"


# --- the validator rejects what it should ------------------------------------------------------------------------


def deployment(rendered) -> dict:
    return copy.deepcopy(one(rendered["base"], "Deployment", "verifier"))


def test_validator_rejects_a_misspelled_deployment_field(rendered):
    broken = deployment(rendered)
    broken["spec"]["replica"] = broken["spec"].pop("replicas")
    (problem,) = render.validate(broken)
    assert problem == (
        "spec: Additional properties are not allowed ('replica' was unexpected) "
        f"(Kubernetes {', '.join(render.KUBERNETES_VERSIONS)})"
    )


def test_validator_rejects_a_misspelled_container_field(rendered):
    broken = deployment(rendered)
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    (problem,) = render.validate(broken)
    assert problem.startswith("spec.template.spec.containers.0.securityContext: ")
    assert "'readOnlyRootFileSystem' was unexpected" in problem


def test_validator_rejects_a_wrongly_typed_field(rendered):
    broken = deployment(rendered)
    broken["spec"]["replicas"] = "two"
    assert render.validate(broken)


def virtual_service(rendered) -> dict:
    return copy.deepcopy(one(rendered["istio"], "VirtualService", "scheduler"))


def test_validator_rejects_a_misspelled_virtual_service_field(rendered):
    broken = virtual_service(rendered)
    broken["spec"]["http"][0]["retries"]["retryOnn"] = broken["spec"]["http"][0]["retries"].pop("retryOn")
    assert render.validate(broken) == [
        "spec.http.0.retries: Additional properties are not allowed ('retryOnn' was unexpected)"
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [("retryOn", "connect-failure,refused-streams"), ("perTryTimeout", "2 seconds"), ("attempts", -1)],
)
def test_validator_rejects_bad_istio_values(rendered, field, value):
    broken = virtual_service(rendered)
    broken["spec"]["http"][0]["retries"][field] = value
    (problem,) = render.validate(broken)
    assert problem.startswith(f"spec.http.0.retries.{field}: ")


def test_validator_rejects_a_bad_destination_rule_and_peer_authentication(rendered):
    rule = copy.deepcopy(one(rendered["istio"], "DestinationRule", "drafter"))
    rule["spec"]["trafficPolicy"]["tls"]["mode"] = "ISTIO_MUTAL"
    assert render.validate(rule)
    peer = copy.deepcopy(one(rendered["istio"], "PeerAuthentication", "default"))
    peer["spec"]["mTLS"] = peer["spec"].pop("mtls")
    assert render.validate(peer)


def test_validator_rejects_kinds_it_has_no_schema_for():
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    assert "Couldn't find schema for kind Widget" in render.validate(unknown)[0]
    gateway = {"apiVersion": "networking.istio.io/v1", "kind": "Gateway", "metadata": {"name": "g"}, "spec": {}}
    assert "no schema for networking.istio.io/v1 Gateway" in render.validate(gateway)[0]


def test_main_reports_overlay_object_and_error_and_fails(tmp_path, monkeypatch, capsys):
    overlay = tmp_path / "broken"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources:\n  - vs.yaml\n")
    (overlay / "vs.yaml").write_text(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: typo\n"
        "spec:\n  hosts: [typo]\n  http:\n    - route:\n        - destination:\n            host: typo\n"
        "      timout: 5s\n"
    )
    monkeypatch.setattr(render, "OVERLAYS", {"broken": overlay})
    monkeypatch.setattr(render, "RENDERED_DIR", tmp_path / "rendered")
    assert render.main([]) == 1
    out, err = capsys.readouterr()
    assert (
        "broken: VirtualService/typo: spec.http.0: Additional properties are not allowed ('timout' was unexpected)"
        in err
    )
    assert "broken: 1 problem(s) in 1 objects" in out
    assert (tmp_path / "rendered" / "broken.yaml").is_file()


def test_main_reports_a_kustomize_failure(tmp_path, monkeypatch, capsys):
    overlay = tmp_path / "missing"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources:\n  - nowhere.yaml\n")
    monkeypatch.setattr(render, "OVERLAYS", {"missing": overlay})
    assert render.main(["--stdout"]) == 1
    assert "missing: kubectl kustomize" in capsys.readouterr().err


def test_render_writes_every_overlay(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(render, "RENDERED_DIR", tmp_path)
    assert render.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == list(render.OVERLAYS)
    assert all(" objects valid" in line for line in out)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(f"{name}.yaml" for name in render.OVERLAYS)


# --- metrics -----------------------------------------------------------------------------------------------------

METRICS_PORTS = {"scheduler": 9464, "drafter": 9465, "verifier": 9466, "refiner": 9467}


def test_metrics_ports_are_the_services_defaults():
    from deliberate.drafter.settings import DrafterSettings
    from deliberate.refiner.settings import RefinerSettings
    from deliberate.scheduler.settings import SchedulerSettings
    from deliberate.verifier.settings import VerifierSettings

    models = {
        "scheduler": SchedulerSettings,
        "drafter": DrafterSettings,
        "verifier": VerifierSettings,
        "refiner": RefinerSettings,
    }
    assert {name: model.model_fields["metrics_port"].default for name, model in models.items()} == METRICS_PORTS


@pytest.mark.parametrize("overlay", list(render.OVERLAYS))
def test_every_service_is_annotated_for_scraping_on_its_metrics_port(rendered, overlay):
    objects = rendered[overlay]
    for name, port in METRICS_PORTS.items():
        annotations = one(objects, "Deployment", name)["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port)
        assert annotations["prometheus.io/path"] == "/metrics"
        container_ports = {p["name"]: p["containerPort"] for p in container(objects, name)["ports"]}
        assert container_ports["metrics"] == port
        service_ports = {p["name"]: p for p in one(objects, "Service", name)["spec"]["ports"]}
        assert service_ports["metrics"]["port"] == port and service_ports["metrics"]["targetPort"] == "metrics"
        assert "DELIBERATE_METRICS_PORT" not in env(objects, name), "the default is the port annotated"


def test_service_monitor_scrapes_exactly_the_four_services(rendered):
    objects = rendered["monitoring"]
    monitor = one(objects, "ServiceMonitor", "deliberate")
    assert monitor["metadata"]["namespace"] == "deliberate"
    (expression,) = monitor["spec"]["selector"]["matchExpressions"]
    selected = {
        name
        for name, service in of_kind(objects, "Service").items()
        if service["metadata"]["labels"].get(expression["key"]) in expression["values"]
    }
    assert selected == set(SERVICES)
    (endpoint,) = monitor["spec"]["endpoints"]
    for name in selected:
        assert endpoint["port"] in {p["name"] for p in one(objects, "Service", name)["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert of_kind(objects, "Deployment") == of_kind(rendered["base"], "Deployment")


def test_a_misspelled_service_monitor_field_is_rejected(rendered):
    monitor = copy.deepcopy(one(rendered["monitoring"], "ServiceMonitor", "deliberate"))
    monitor["spec"]["endpoints"][0]["intervall"] = "15s"
    assert any("intervall" in problem for problem in render.validate(monitor))


def test_monitoring_scales_the_drafter_on_the_queue_it_exports(rendered):
    """The monitoring overlay's Drafter autoscaler asks the custom metrics API for a series that the Prometheus
    adapter's rules serve, from a gauge the Drafter really exports (docs/scaling.md)."""
    objects = rendered["monitoring"]
    metrics = one(objects, "HorizontalPodAutoscaler", "drafter")["spec"]["metrics"]
    assert {m["type"] for m in metrics} == {"Resource", "Pods"}  # CPU stays; the queue adds a reason to scale
    wanted = next(m["pods"]["metric"]["name"] for m in metrics if m["type"] == "Pods")
    adapter = yaml.safe_load(one(objects, "ConfigMap", "prometheus-adapter-deliberate")["data"]["config.yaml"])
    rule = next(r for r in adapter["rules"] if r["name"]["as"] == wanted)
    series = rule["seriesQuery"].split("{", 1)[0].strip("'")
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}  # per pod, as a Pods metric needs
    exported = (REPO_ROOT / "services/deliberate/core/metrics.py").read_text()
    assert f'"{series.replace("_", ".")}"' in exported
    assert not any(
        m["type"] == "Pods" for m in one(rendered["base"], "HorizontalPodAutoscaler", "drafter")["spec"]["metrics"]
    )
