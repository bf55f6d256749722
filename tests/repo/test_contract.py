"""The contract: the committed Python code (deliberate-api) is exactly what `make proto` generates from protos/,
and `buf breaking` against the committed baseline passes for the protos as they are and fails for a break."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUF = shutil.which("buf", path=str(Path(sys.executable).parent)) or shutil.which("buf")


def generated_files(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text()
        for path in sorted(root.glob("deliberate_api/**/*_pb2*.py*"))
        if path.suffix in (".py", ".pyi")
    }


def test_committed_stubs_match_the_protos(tmp_path):
    subprocess.run(
        ["bash", str(ROOT / "protos/generate.sh"), str(tmp_path)],
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    fresh = generated_files(tmp_path)
    committed = generated_files(ROOT / "protos/python")
    assert fresh, "the generator produced nothing"
    assert sorted(fresh) == sorted(committed), "stub files added or removed: run `make proto`"
    drifted = [name for name in fresh if fresh[name] != committed[name]]
    assert not drifted, f"stubs drifted from the protos, run `make proto`: {drifted}"


def test_every_service_package_is_versioned_and_named_by_buf_style():
    from deliberate_api.drafter.v1 import drafter_service_pb2
    from deliberate_api.refiner.v1 import refiner_service_pb2
    from deliberate_api.scheduler.v1 import scheduler_service_pb2
    from deliberate_api.verifier.v1 import verifier_service_pb2

    for module in (drafter_service_pb2, refiner_service_pb2, scheduler_service_pb2, verifier_service_pb2):
        (service,) = module.DESCRIPTOR.services_by_name.values()
        assert service.full_name.startswith("deliberate.") and ".v1." in service.full_name
        assert service.name.endswith("Service")
        for method in service.methods:
            assert method.input_type.name == f"{method.name}Request"
            assert method.output_type.name == f"{method.name}Response"


def test_generated_code_imports_only_the_contract_package():
    """protoc imports `deliberate.<svc>.v1` modules; generate.sh rewrites them, as `deliberate` is the servers'."""
    imports = [
        line
        for path in (ROOT / "protos/python/deliberate_api").rglob("*_pb2*.py*")
        for line in path.read_text().splitlines()
        if re.match(r"from deliberate[._]", line)
    ]
    assert imports and all(line.startswith("from deliberate_api.") for line in imports), imports


def test_no_server_package_imports_another_service_s_package():
    services = ("drafter", "verifier", "refiner", "scheduler")
    for service in services:
        for path in (ROOT / "services/deliberate" / service).rglob("*.py"):
            others = [s for s in services if s != service]
            found = re.findall(rf"^\s*(?:from|import) deliberate\.({'|'.join(others)})\b", path.read_text(), re.M)
            assert not found, f"{path.relative_to(ROOT)} imports {found}"


@pytest.mark.skipif(BUF is None, reason="buf is installed by `make install` (buf-bin)")
def test_buf_breaking_passes_for_the_protos_and_catches_a_removed_field(tmp_path):
    subprocess.run([BUF, "breaking", "--against", "baseline.binpb"], cwd=ROOT / "protos", check=True)

    protos = shutil.copytree(ROOT / "protos", tmp_path / "protos", ignore=shutil.ignore_patterns("python"))
    proto = protos / "deliberate/scheduler/v1/scheduler_service.proto"
    proto.write_text(proto.read_text().replace("  string thinking_trace = 7;\n", ""))
    broken = subprocess.run(
        [BUF, "breaking", "--against", "baseline.binpb"], cwd=protos, capture_output=True, text=True
    )
    assert broken.returncode != 0
    assert "SolveResponse" in broken.stdout + broken.stderr and "thinking_trace" in broken.stdout + broken.stderr
