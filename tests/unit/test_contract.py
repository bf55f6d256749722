"""The committed stubs are exactly what `make proto` generates from protos/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def generated_files(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text()
        for path in sorted(root.rglob("*_pb2*.py*"))
        if path.suffix in (".py", ".pyi")
    }


def test_committed_stubs_match_the_protos(tmp_path):
    subprocess.run(
        ["bash", str(ROOT / "protos/generate.sh"), str(tmp_path)],
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    fresh = generated_files(tmp_path)
    committed = generated_files(ROOT / "services")
    assert fresh, "the generator produced nothing"
    assert sorted(fresh) == sorted(committed), "stub files added or removed: run `make proto`"
    drifted = [name for name in fresh if fresh[name] != committed[name]]
    assert not drifted, f"stubs drifted from the protos, run `make proto`: {drifted}"


def test_every_service_package_is_versioned_and_named_by_buf_style():
    from deliberate.drafter.v1 import drafter_service_pb2
    from deliberate.refiner.v1 import refiner_service_pb2
    from deliberate.scheduler.v1 import scheduler_service_pb2
    from deliberate.verifier.v1 import verifier_service_pb2

    for module in (drafter_service_pb2, refiner_service_pb2, scheduler_service_pb2, verifier_service_pb2):
        (service,) = module.DESCRIPTOR.services_by_name.values()
        assert service.full_name.startswith("deliberate.") and ".v1." in service.full_name
        assert service.name.endswith("Service")
        for method in service.methods:
            assert method.input_type.name == f"{method.name}Request"
            assert method.output_type.name == f"{method.name}Response"
